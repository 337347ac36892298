// Exact GELU of large float16 / bfloat16 tensors as a table lookup, with the erff kernel's bits.
//
// A 16-bit input has 65536 values, so GELU of every one of them fits in a 128 KB table, and a
// kernel that maps input bits to output bits replaces erff (two polynomial branches, ~25
// FMA-pipe instructions an element, both run by a warp of mixed inputs) with one shared-memory
// load an element. The table is made on the device by the same expression the erff kernel
// evaluates (activate<kGelu>, rounded by from_float), so either kernel gives every input the
// same bits (the GPU tests compare all 65536), and the launcher may choose by speed alone.
//
// The table kernel: one block an SM (persistent; the table takes 128 KB of its shared memory)
// copies the table from global memory and walks the tensor in steps of two 16-byte vectors a
// thread, the next step's loads issued before the current step is mapped. It pays only on large
// tensors: on the H200 (fp16) the erff kernel is faster up to 2M elements (the table copy costs
// ~2.2 us), level at 4M, and the table 14% faster at 16M (20.96 against 24.35 us).
//
// The tables live in this module's device memory, uninitialized until the first call that
// wants them: make_gelu_tables fills them on a stream of its own and waits. A call made while
// its stream is being captured into a CUDA graph does not (a graph must not depend on work
// outside it): it takes the erff kernel, with the same bits.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "oasr/common/arch_facts.h"
#include "oasr/common/types.h"
#include "oasr/common/vec_dtypes.h"
#include "oasr/norm/activation_functors.cuh"

namespace oasr::norm {

constexpr int kGeluTableEntries = 1 << 16;
constexpr int kGeluTableBytes = kGeluTableEntries * 2;
constexpr int kGeluTableThreads = 1024;
// Contiguous 16-bit tensors of at least this many elements take the table kernel.
constexpr int64_t kGeluTableMinElements = int64_t(1) << 22;

namespace detail {
static __device__ uint16_t gelu_table_fp16[kGeluTableEntries];
static __device__ uint16_t gelu_table_bf16[kGeluTableEntries];
}  // namespace detail

template <typename T>
OASR_DEVICE uint16_t* gelu_table() {
  static_assert(sizeof(T) == 2, "the GELU tables are of 16-bit types");
  if constexpr (std::is_same_v<T, half>) {
    return detail::gelu_table_fp16;
  } else {
    return detail::gelu_table_bf16;
  }
}

// table[b] = GELU of the T with bits b, exactly as activation_kernel<kGelu, T> computes it.
template <typename T>
__global__ void gelu_table_init_kernel() {
  const int b = blockIdx.x * blockDim.x + threadIdx.x;
  if (b >= kGeluTableEntries) return;
  const uint16_t bits = static_cast<uint16_t>(b);
  T x, y;
  memcpy(&x, &bits, 2);
  y = from_float<T>(activate<Activation::kGelu>(to_float(x)));
  memcpy(&gelu_table<T>()[b], &y, 2);
}

OASR_DEVICE uint32_t gelu_table_word(const uint16_t* table, uint32_t w) {
  return uint32_t(table[w & 0xffff]) | (uint32_t(table[w >> 16]) << 16);
}

OASR_DEVICE uint4 gelu_table_vec(const uint16_t* table, uint4 v) {
  return make_uint4(gelu_table_word(table, v.x), gelu_table_word(table, v.y),
                    gelu_table_word(table, v.z), gelu_table_word(table, v.w));
}

// A persistent block's walk over 16-byte vectors: steps of 2 * kThreads vectors, gridDim.x
// blocks' steps apart. The constructor issues the first step's loads, so that they overlap
// whatever the block does before run() (copy a table); run(map) stores map(vector) for every
// vector, each step's loads issued before the previous step is mapped.
template <int kThreads>
struct PersistentVecWalk {
  const uint4* x;
  uint4* out;
  int64_t num_vecs, v;
  uint4 lo = {}, hi = {};

  OASR_DEVICE PersistentVecWalk(const uint4* x_, uint4* out_, int64_t num_vecs_)
      : x(x_), out(out_), num_vecs(num_vecs_),
        v(int64_t(blockIdx.x) * kThreads * 2 + threadIdx.x) {
    if (v < num_vecs) lo = x[v];
    if (v + kThreads < num_vecs) hi = x[v + kThreads];
  }

  template <typename Map>
  OASR_DEVICE void run(Map&& map) {
    const int64_t stride = int64_t(gridDim.x) * kThreads * 2;
    while (v < num_vecs) {
      const int64_t next = v + stride;
      uint4 next_lo = {}, next_hi = {};
      if (next < num_vecs) next_lo = x[next];
      if (next + kThreads < num_vecs) next_hi = x[next + kThreads];
      out[v] = map(lo);
      if (v + kThreads < num_vecs) out[v + kThreads] = map(hi);
      v = next;
      lo = next_lo;
      hi = next_hi;
    }
  }
};

// out[i] = GELU(x[i]) for i < n, x and out contiguous on 16-byte boundaries: n / 8 vectors, the
// n % 8 tail done by block 0 after its walk. Dynamic shared memory: kGeluTableBytes.
template <typename T>
__global__ void __launch_bounds__(kGeluTableThreads, 1)
    gelu_table_kernel(uint16_t* out16, const uint16_t* x16, int64_t n) {
  extern __shared__ uint4 smem_table[];
  const int64_t num_vecs = n / 8;
  PersistentVecWalk<kGeluTableThreads> walk(reinterpret_cast<const uint4*>(x16),
                                            reinterpret_cast<uint4*>(out16), num_vecs);
  const auto* table_vecs = reinterpret_cast<const uint4*>(gelu_table<T>());
  for (int i = threadIdx.x; i < kGeluTableBytes / 16; i += kGeluTableThreads) {
    smem_table[i] = table_vecs[i];
  }
  __syncthreads();
  const auto* table = reinterpret_cast<const uint16_t*>(smem_table);
  walk.run([&](uint4 q) { return gelu_table_vec(table, q); });
  if (blockIdx.x == 0 && threadIdx.x < n - num_vecs * 8) {
    const int64_t i = num_vecs * 8 + threadIdx.x;
    out16[i] = table[x16[i]];
  }
}

// Fills both tables of the current device once (per process), on a stream of its own, and
// waits; allows the table kernels their shared memory. *ready: the tables are made. Not while
// `stream` is being captured: *ready stays false and nothing is launched.
inline cudaError_t make_gelu_tables(cudaStream_t stream, bool* ready) {
  int device;
  cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess) return err;
  static std::atomic<bool> made[kMaxDevices] = {};
  *ready = device < kMaxDevices && made[device].load(std::memory_order_acquire);
  if (*ready || device >= kMaxDevices) return cudaSuccess;
  cudaStreamCaptureStatus capture;
  if ((err = cudaStreamIsCapturing(stream, &capture)) != cudaSuccess) return err;
  if (capture != cudaStreamCaptureStatusNone) return cudaSuccess;
  for (auto kernel : {gelu_table_kernel<half>, gelu_table_kernel<bfloat16>}) {
    err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               kGeluTableBytes);
    if (err != cudaSuccess) return err;
  }
  // Another stream of this thread, or another thread, may be capturing in global mode, which
  // refuses a stream synchronization: this thread's mode is relaxed while it makes the tables
  // (on a stream no capture sees), as PyTorch's allocator does for cudaMalloc.
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  if ((err = cudaThreadExchangeStreamCaptureMode(&mode)) != cudaSuccess) return err;
  cudaStream_t own;
  err = cudaStreamCreateWithFlags(&own, cudaStreamNonBlocking);
  if (err == cudaSuccess) {
    gelu_table_init_kernel<half><<<kGeluTableEntries / 256, 256, 0, own>>>();
    gelu_table_init_kernel<bfloat16><<<kGeluTableEntries / 256, 256, 0, own>>>();
    err = cudaGetLastError();
    const cudaError_t sync = cudaStreamSynchronize(own);
    cudaStreamDestroy(own);
    if (err == cudaSuccess) err = sync;
  }
  cudaThreadExchangeStreamCaptureMode(&mode);  // back to the caller's mode
  if (err != cudaSuccess) return err;
  made[device].store(true, std::memory_order_release);  // a race makes the same tables twice
  *ready = true;
  return cudaSuccess;
}

// Whether the table kernel can take x and out: contiguous (rows == 1 or x_stride == cols) and
// on 16-byte boundaries.
inline bool gelu_table_fits(const void* out, const void* x, int64_t rows, int64_t cols,
                            int64_t x_stride) {
  return (rows == 1 || x_stride == cols) && reinterpret_cast<uintptr_t>(out) % 16 == 0 &&
         reinterpret_cast<uintptr_t>(x) % 16 == 0;
}

// The table kernel over n elements; make_gelu_tables must have reported them ready.
template <typename T>
cudaError_t launch_gelu_table(T* out, const T* x, int64_t n, cudaStream_t stream) {
  int device;
  const cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess) return err;
  const int64_t sms = std::max(num_sms(device), 1);
  const int64_t steps = ceil_div<int64_t>(n / 8, 2 * kGeluTableThreads);
  const int blocks = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(steps, sms)));
  gelu_table_kernel<T><<<blocks, kGeluTableThreads, kGeluTableBytes, stream>>>(
      reinterpret_cast<uint16_t*>(out), reinterpret_cast<const uint16_t*>(x), n);
  return cudaGetLastError();
}

}  // namespace oasr::norm
