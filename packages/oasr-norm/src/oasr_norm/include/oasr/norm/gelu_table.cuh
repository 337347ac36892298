// Exact GELU of float16 / bfloat16 tensors as a table lookup.
//
// A 16-bit input has 65536 values, so the module holds GELU of every one of them, correctly
// rounded to the dtype (oasr_norm._gelu_table computes them in float64), and a kernel maps
// input bits to output bits. That replaces erff (two polynomial branches, ~25 FMA-pipe
// instructions an element, both run by a warp of mixed inputs) with one shared-memory load an
// element. On the H200 (benchmarks/experiments/gelu_table.cu) the erff kernel ran at 71% / 81%
// of copy at 8000 x 2048 / 32000 x 5120, this one at 80% / 88-91%.
//
// Two kernels, one table, so every layout gets the same bits:
//   smem    contiguous x and out on 16-byte boundaries, at least kGeluTableSmemMinElements:
//           one block an SM (persistent; the table is 128 KB of its shared memory) copies the
//           table from global memory (L2 after the first block) and walks the tensor in steps
//           of two 16-byte vectors a thread, the next step's loads issued before the current
//           step is mapped
//   gather  anything else (row-strided x, unaligned bases, small tensors): the activation
//           launch shape of activation.cuh, one element a slot, the table read through L1
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "oasr/common/index_divmod.cuh"
#include "oasr/common/types.h"
#include "oasr/norm/activation.cuh"

namespace oasr::norm {

constexpr int kGeluTableEntries = 1 << 16;
constexpr int kGeluTableBytes = kGeluTableEntries * 2;
constexpr int kGeluTableThreads = 1024;
// Below this many elements the table copy (128 KB an SM, ~2.6 us for 132 SMs) outweighs erff's
// cost, and the gather kernel's few blocks find the entries they use in L1.
constexpr int64_t kGeluTableSmemMinElements = int64_t(1) << 20;

// Which kernel: the launcher's choice, or one forced (the GPU tests run both on each input).
enum class GeluTablePath : int { kAuto = 0, kSmem = 1, kGather = 2 };

// out[r, c] = table[x[r, c]] over 16-bit patterns; out contiguous, x's rows x_stride apart.
struct GeluTableArgs {
  uint16_t* out;
  const uint16_t* x;
  int64_t rows, cols, x_stride;
  const uint16_t* table;  // kGeluTableEntries entries in global memory
};

OASR_DEVICE uint32_t gelu_table_word(const uint16_t* table, uint32_t w) {
  return uint32_t(table[w & 0xffff]) | (uint32_t(table[w >> 16]) << 16);
}

OASR_DEVICE uint4 gelu_table_vec(const uint16_t* table, uint4 v) {
  return make_uint4(gelu_table_word(table, v.x), gelu_table_word(table, v.y),
                    gelu_table_word(table, v.z), gelu_table_word(table, v.w));
}

// Contiguous x and out on 16-byte boundaries; num_vecs = n / 8 vectors, the n % 8 tail done by
// block 0 after its walk. Dynamic shared memory: kGeluTableBytes.
__global__ void __launch_bounds__(kGeluTableThreads, 1)
    gelu_table_smem_kernel(GeluTableArgs a, int64_t num_vecs) {
  extern __shared__ uint4 smem_table[];
  const auto* x = reinterpret_cast<const uint4*>(a.x);
  auto* out = reinterpret_cast<uint4*>(a.out);
  const int64_t stride = int64_t(gridDim.x) * kGeluTableThreads * 2;
  int64_t v = int64_t(blockIdx.x) * kGeluTableThreads * 2 + threadIdx.x;
  // The first step's loads go out before the table copy, so they overlap it.
  uint4 lo = {}, hi = {};
  if (v < num_vecs) lo = x[v];
  if (v + kGeluTableThreads < num_vecs) hi = x[v + kGeluTableThreads];
  const auto* table_vecs = reinterpret_cast<const uint4*>(a.table);
  for (int i = threadIdx.x; i < kGeluTableBytes / 16; i += kGeluTableThreads) {
    smem_table[i] = table_vecs[i];
  }
  __syncthreads();
  const auto* table = reinterpret_cast<const uint16_t*>(smem_table);
  while (v < num_vecs) {
    const int64_t next = v + stride;
    uint4 next_lo = {}, next_hi = {};
    if (next < num_vecs) next_lo = x[next];
    if (next + kGeluTableThreads < num_vecs) next_hi = x[next + kGeluTableThreads];
    out[v] = gelu_table_vec(table, lo);
    if (v + kGeluTableThreads < num_vecs) out[v + kGeluTableThreads] = gelu_table_vec(table, hi);
    v = next;
    lo = next_lo;
    hi = next_hi;
  }
  const int64_t tail = a.rows * a.cols - num_vecs * 8;
  if (blockIdx.x == 0 && threadIdx.x < tail) {
    const int64_t i = num_vecs * 8 + threadIdx.x;
    a.out[i] = table[a.x[i]];
  }
}

// Any layout, one element a slot: element i of the output is x[i / cols, i % cols].
__global__ void __launch_bounds__(kActivationThreads, kActivationMinBlocks)
    gelu_table_gather_kernel(GeluTableArgs a, IndexDivmod cols) {
  chunked_steps<uint16_t>(
      a.rows * a.cols,
      [&](int64_t i, uint16_t& slot) {
        const int64_t row = cols.div(i);
        slot = a.x[row * a.x_stride + (i - row * cols.divisor)];
      },
      [&](int64_t i, uint16_t& slot) { a.out[i] = __ldg(a.table + slot); });
}

// Whether the smem kernel can take a: x and out contiguous, on 16-byte boundaries.
inline bool gelu_table_smem_fits(const GeluTableArgs& a) {
  return (a.rows == 1 || a.x_stride == a.cols) && is_vec_aligned<uint16_t, 8>(a.x) &&
         is_vec_aligned<uint16_t, 8>(a.out);
}

// The smem kernel takes 128 KB of dynamic shared memory: allowed once per device.
inline cudaError_t allow_gelu_table_smem() {
  int device;
  cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess) return err;
  constexpr int kMaxDevices = 64;
  static std::atomic<bool> allowed[kMaxDevices] = {};  // a race only repeats an idempotent call
  if (device < kMaxDevices && allowed[device].load(std::memory_order_relaxed)) return cudaSuccess;
  err = cudaFuncSetAttribute(gelu_table_smem_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             kGeluTableBytes);
  if (err == cudaSuccess && device < kMaxDevices) allowed[device].store(true);
  return err;
}

// path kAuto: the smem kernel where it fits and the tensor has at least
// kGeluTableSmemMinElements elements, else the gather kernel. A forced kSmem where it does not
// fit is cudaErrorInvalidValue (the binding refuses it first, with a message).
inline cudaError_t launch_gelu_table(const GeluTableArgs& a, GeluTablePath path,
                                     cudaStream_t stream) {
  const int64_t n = a.rows * a.cols;
  if (path == GeluTablePath::kAuto) {
    path = gelu_table_smem_fits(a) && n >= kGeluTableSmemMinElements ? GeluTablePath::kSmem
                                                                      : GeluTablePath::kGather;
  }
  if (path == GeluTablePath::kSmem) {
    if (!gelu_table_smem_fits(a)) return cudaErrorInvalidValue;
    cudaError_t err = allow_gelu_table_smem();
    if (err != cudaSuccess) return err;
    int device, sms;
    if ((err = cudaGetDevice(&device)) != cudaSuccess) return err;
    err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
    if (err != cudaSuccess) return err;
    const int64_t num_vecs = n / 8;
    const int64_t steps = ceil_div<int64_t>(num_vecs, 2 * kGeluTableThreads);
    const int blocks = static_cast<int>(std::clamp<int64_t>(steps, 1, sms));
    gelu_table_smem_kernel<<<blocks, kGeluTableThreads, kGeluTableBytes, stream>>>(a, num_vecs);
    return cudaGetLastError();
  }
  const int64_t chunks = ceil_div<int64_t>(n, int64_t(kActivationThreads) * kStepSlots<uint16_t>);
  if (chunks > INT32_MAX) return cudaErrorInvalidConfiguration;
  gelu_table_gather_kernel<<<static_cast<unsigned>(std::max<int64_t>(chunks, 1)),
                             kActivationThreads, 0, stream>>>(a, IndexDivmod(a.cols, n - 1));
  return cudaGetLastError();
}

}  // namespace oasr::norm
