// gemm_log_softmax in one kernel for small vocabularies (module oasr_gemm_log_softmax_head, sm_90a):
// out [M, V] = log_softmax(A [M, K] · B [V, K]ᵀ + bias [V]) for V <= 512, without the logits
// ever leaving the SM. The two-pass route (a GEMM writing the logits, the row pass reading them
// back) moves the [M, V] tensor three times; here it is written once.
//
// A CTA owns 64 rows and all (up to 512) columns, so each row's max and sum are complete inside
// it. Warpgroup g computes columns [256 g, 256 g + 256) with wgmma m64n256k16 (128 fp32
// accumulators a thread): two warpgroups for V > 256, one below. K streams through three
// shared-memory stages of 64 (128 bytes of a row: one 128B-swizzle atom), loaded by TMA: A's
// box 64 x 64, B's boxes of 256 rows; a chunk's MMAs stay in flight while the next chunk's are
// issued. TMA zero-fills rows past M or V and K past its end. The epilogue adds the bias (-inf
// past V), rounds the logits to T (as PyTorch's log_softmax(linear(x)) and the two-pass route
// see them), reduces each row's max and sum of exp (the quad's lanes by shuffles, the
// warpgroups through shared memory), stages the log-probabilities in the stage buffers and
// copies the CTA's rows, one contiguous span of out, with 16-byte stores.
//
// Measured on the H200 (session 12, fp16, 8000 x 500 x 256): the two passes 19.8 µs; this kernel
// with cp.async loads and stores straight from the accumulators 21.0, with the output staged
// 14.2, with TMA 12.1 (first load 1.4 µs, wgmma 0.76 µs a K chunk, row reductions 2.0, stores
// 2.3: 8 MB at DRAM write speed), with three stages, MMAs kept in flight and two fewer
// instructions an output 10.7 (events; docs/gemm.md, "One kernel for V <= 256,
// and V <= 512 from 2000 rows").
#include <cuda.h>  // CUtensorMap and its encoder's types; the encoder comes from the runtime
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <atomic>
#include <cmath>
#include <type_traits>

#include "oasr/common/softmax.cuh"  // softmax_exp2: MUFU.EX2 alone, -inf -> 0
#include "oasr/common/types.h"
#include "tvm_ffi_utils.h"

using namespace oasr;

namespace {

constexpr int kRows = 64;           // rows per CTA
constexpr int kCols = 512;          // columns per CTA: the largest V
constexpr int kGroupCols = 256;     // columns per warpgroup (one wgmma N)
constexpr int kChunkK = 64;         // K per stage: 128 bytes, the swizzle atom's width
constexpr int kStages = 3;          // 3 x 72 KB of shared memory
constexpr int kStageA = kRows * kChunkK;  // elements
constexpr int kStageB = kCols * kChunkK;

template <typename T>
struct SharedStorage {
  alignas(1024) T a[kStages][kStageA];  // 128B-swizzled: 16-byte piece p of row r at p ^ (r % 8)
  alignas(1024) T b[kStages][kStageB];  // (the layout TMA writes and the descriptors name)
  float bias[kCols];                    // -inf past V: those columns drop out of max and sum
  float partial[kRows][2];              // a row's max, then sum, per warpgroup
  alignas(8) uint64_t full[kStages];    // a stage's TMA bytes have landed
};
// the output tile [64][V] is staged in the B stages once the K loop is done
static_assert(sizeof(SharedStorage<half>::b) >= kRows * kCols * sizeof(half));

__device__ __forceinline__ float to_float(half x) { return __half2float(x); }
__device__ __forceinline__ float to_float(bfloat16 x) { return __bfloat162float(x); }
template <typename T>
__device__ __forceinline__ T from_float(float x);
template <>
__device__ __forceinline__ half from_float<half>(float x) { return __float2half_rn(x); }
template <>
__device__ __forceinline__ bfloat16 from_float<bfloat16>(float x) { return __float2bfloat16_rn(x); }

template <typename T>
struct alignas(4) Pair {
  T x, y;
};

// (x, y) rounded to T and back: one pack, two unpacks
template <typename T>
__device__ __forceinline__ float2 rounded(float x, float y) {
  if constexpr (std::is_same_v<T, half>) {
    return __half22float2(__floats2half2_rn(x, y));
  } else {
    return __bfloat1622float2(__floats2bfloat162_rn(x, y));
  }
}

__device__ __forceinline__ unsigned smem_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// wgmma's shared-memory matrix descriptor for a K-major tile in the 128B swizzle: leading byte
// offset unused (16), 1024 bytes between 8-row groups, swizzle mode 1. Base 1024-aligned; the
// k16 steps inside a 64-wide chunk advance the start by 32 bytes.
__device__ __forceinline__ uint64_t descriptor(const void* tile) {
  const uint64_t addr = smem_addr(tile);
  return ((addr & 0x3FFFF) >> 4) | (uint64_t(16 >> 4) << 16) | (uint64_t(1024 >> 4) << 32) |
         (uint64_t(1) << 62);
}

#define OASR_HEAD_D8(i) \
  "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), \
      "+f"(d[i + 6]), "+f"(d[i + 7])
#define OASR_HEAD_D32(i) OASR_HEAD_D8(i), OASR_HEAD_D8(i + 8), OASR_HEAD_D8(i + 16), OASR_HEAD_D8(i + 24)
#define OASR_HEAD_WGMMA(type)                                                                   \
  asm volatile(                                                                                 \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"                                             \
      "wgmma.mma_async.sync.aligned.m64n256k16.f32." type "." type " {"                         \
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                  \
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "        \
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "         \
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "         \
      "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "        \
      "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "        \
      "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, "  \
      "%111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, "    \
      "%125, %126, %127}, %128, %129, p, 1, 1, 0, 0;\n}\n"                                      \
      : OASR_HEAD_D32(0), OASR_HEAD_D32(32), OASR_HEAD_D32(64), OASR_HEAD_D32(96)               \
      : "l"(desc_a), "l"(desc_b), "r"(1))

// d (+)= A · Bᵀ for one k16 step, A 64 x 16 and B 256 x 16 from shared memory
template <typename T>
__device__ __forceinline__ void wgmma_m64n256k16(float (&d)[128], uint64_t desc_a,
                                                 uint64_t desc_b) {
  if constexpr (std::is_same_v<T, half>) {
    OASR_HEAD_WGMMA("f16");
  } else {
    OASR_HEAD_WGMMA("bf16");
  }
}

__device__ __forceinline__ void barrier_init(uint64_t* bar) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(smem_addr(bar)));
}

__device__ __forceinline__ void barrier_expect_bytes(uint64_t* bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_addr(bar)),
               "r"(bytes)
               : "memory");
}

__device__ __forceinline__ void barrier_wait(uint64_t* bar, unsigned parity) {
  asm volatile(
      "{\n.reg .pred done;\nwait_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra wait_%=;\n}\n" ::"r"(smem_addr(bar)),
      "r"(parity)
      : "memory");
}

// the box of `map` at (k, row) into shared memory; completes bytes on `bar`
__device__ __forceinline__ void tma_load(void* dst, const CUtensorMap* map, int k, int row,
                                         uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3}], [%4];\n" ::"r"(smem_addr(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(k), "r"(row), "r"(smem_addr(bar))
      : "memory");
}

struct HeadMaps {
  CUtensorMap a;  // A [M, K], box 64 x 64
  CUtensorMap b;  // B [V, K], box 256 x 64
};

// kGroups warpgroups: 2 for V > 256, else 1 (a CTA of 128 threads: no columns left idle)
template <typename T, int kGroups>
__global__ void __launch_bounds__(kGroups * 128, 1)
    log_softmax_head_kernel(const __grid_constant__ HeadMaps maps, const T* __restrict__ bias,
                            T* __restrict__ out, int M, int K, int V) {
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
  __trap();  // built for another architecture too (OASR_CUDA_ARCH_LIST); the launcher refuses
#else
  constexpr int kThreads = kGroups * 128;
  extern __shared__ unsigned char smem_raw[];
  auto& s = *reinterpret_cast<SharedStorage<T>*>(
      (reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  const int group = threadIdx.x / 128, warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32;
  const int m0 = blockIdx.x * kRows;
  const int chunks = (K + kChunkK - 1) / kChunkK;
  constexpr unsigned kStageBytes = (kStageA + kGroups * kGroupCols * kChunkK) * sizeof(T);
  auto load_chunk = [&](int stage, int chunk) {
    barrier_expect_bytes(&s.full[stage], kStageBytes);
    tma_load(s.a[stage], &maps.a, chunk * kChunkK, m0, &s.full[stage]);
#pragma unroll
    for (int box = 0; box < kGroups; ++box) {
      tma_load(s.b[stage] + box * kGroupCols * kChunkK, &maps.b, chunk * kChunkK,
               box * kGroupCols, &s.full[stage]);
    }
  };
  if (threadIdx.x == 0) {
    for (int i = 0; i < kStages; ++i) barrier_init(&s.full[i]);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    for (int i = 0; i < kStages && i < chunks; ++i) load_chunk(i, i);
  }
  for (int c = threadIdx.x; c < kCols; c += kThreads) {
    s.bias[c] = c >= V ? -INFINITY : bias != nullptr ? to_float(bias[c]) : 0.0f;
  }
  __syncthreads();  // the barriers are initialised, the bias is in place

  // K loop: chunk c's MMAs stay in flight while chunk c + 1's are issued; once chunk c - 1's are
  // done in every warpgroup, its stage is refilled with chunk c - 1 + kStages.
  float acc[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) acc[i] = 0.0f;
  for (int c = 0; c < chunks; ++c) {
    const int stage = c % kStages;
    barrier_wait(&s.full[stage], (c / kStages) & 1);
    const T* sa = s.a[stage];
    const T* sb = s.b[stage] + group * kGroupCols * kChunkK;
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
    for (int kk = 0; kk < kChunkK / 16; ++kk) {
      wgmma_m64n256k16<T>(acc, descriptor(sa + kk * 16), descriptor(sb + kk * 16));
    }
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
    __syncthreads();
    if (threadIdx.x == 0 && c >= 1 && c - 1 + kStages < chunks) {
      load_chunk((c - 1) % kStages, c - 1 + kStages);
    }
  }
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");

  // acc[4 j + 2 h + e]: row 16 warp + lane / 4 + 8 h of the CTA, column
  // 256 group + 8 j + 2 (lane % 4) + e (the m64nNk16 accumulator layout)
  const int col_base = group * kGroupCols + (lane % 4) * 2;
  float row_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
  for (int j = 0; j < 32; ++j) {
    const float2 b = *reinterpret_cast<const float2*>(&s.bias[col_base + 8 * j]);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      // the logits rounded to T, as PyTorch's F.linear leaves them
      const float2 x = rounded<T>(acc[4 * j + 2 * h] + b.x, acc[4 * j + 2 * h + 1] + b.y);
      acc[4 * j + 2 * h] = x.x;
      acc[4 * j + 2 * h + 1] = x.y;
      row_max[h] = fmaxf(row_max[h], fmaxf(x.x, x.y));
    }
  }
  // a row's max and sum: the quad's lanes, then the warpgroups through shared memory
  auto across_groups = [&](int row, bool is_max) {
    float v = s.partial[row][0];
    if (kGroups == 2) v = is_max ? fmaxf(v, s.partial[row][1]) : v + s.partial[row][1];
    return v;
  };
  constexpr float kLog2e = 1.4426950408889634f;
  float row_sum[2] = {0.0f, 0.0f};
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    row_max[h] = fmaxf(row_max[h], __shfl_xor_sync(0xffffffffu, row_max[h], 1));
    row_max[h] = fmaxf(row_max[h], __shfl_xor_sync(0xffffffffu, row_max[h], 2));
    if (lane % 4 == 0) s.partial[16 * warp + lane / 4 + 8 * h][group] = row_max[h];
  }
  __syncthreads();
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    row_max[h] = across_groups(16 * warp + lane / 4 + 8 * h, true);
    const float shift = row_max[h] * kLog2e;  // exp(x - max) = 2^(x log2(e) - max log2(e))
#pragma unroll
    for (int j = 0; j < 32; ++j) {
      row_sum[h] += oasr::softmax_exp2(fmaf(acc[4 * j + 2 * h], kLog2e, -shift)) +
                    oasr::softmax_exp2(fmaf(acc[4 * j + 2 * h + 1], kLog2e, -shift));
    }
    row_sum[h] += __shfl_xor_sync(0xffffffffu, row_sum[h], 1);
    row_sum[h] += __shfl_xor_sync(0xffffffffu, row_sum[h], 2);
  }
  __syncthreads();  // every max is read: partial takes the sums
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    if (lane % 4 == 0) s.partial[16 * warp + lane / 4 + 8 * h][group] = row_sum[h];
  }
  __syncthreads();

  // x - max - log(sum), staged as out's rows are laid out: the CTA's rows are one contiguous
  // span of out, copied below with 16-byte stores. The K loop is done with the B stages.
  T* tile = s.b[0];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = 16 * warp + lane / 4 + 8 * h;
    const float shift = row_max[h] + __logf(across_groups(row, false));
    T* tile_row = tile + row * V;
#pragma unroll
    for (int j = 0; j < 32; ++j) {
      const int col = col_base + 8 * j;
      const T y0 = from_float<T>(acc[4 * j + 2 * h] - shift);
      const T y1 = from_float<T>(acc[4 * j + 2 * h + 1] - shift);
      if (V % 2 == 0) {  // the pair is 4-byte aligned: one store
        if (col < V) *reinterpret_cast<Pair<T>*>(tile_row + col) = Pair<T>{y0, y1};
      } else {
        if (col < V) tile_row[col] = y0;
        if (col + 1 < V) tile_row[col + 1] = y1;
      }
    }
  }
  __syncthreads();
  // out + m0 V is 16-byte aligned (the launcher checks out; 64 V elements are 128 V bytes)
  const unsigned count = unsigned(min(kRows, M - m0)) * unsigned(V);
  T* dst = out + size_t(m0) * V;
  for (unsigned i = threadIdx.x * 8; i + 8 <= count; i += kThreads * 8) {
    *reinterpret_cast<uint4*>(dst + i) = *reinterpret_cast<const uint4*>(tile + i);
  }
  for (unsigned i = (count & ~7u) + threadIdx.x; i < count; i += kThreads) dst[i] = tile[i];
#endif
}

using EncodeTiled = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*,
                                 const cuuint64_t*, const cuuint64_t*, const cuuint32_t*,
                                 const cuuint32_t*, CUtensorMapInterleave, CUtensorMapSwizzle,
                                 CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

// cuTensorMapEncodeTiled through the runtime's driver entry point (no link against libcuda)
EncodeTiled encode_tiled() {
  static const EncodeTiled fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult found;
    const cudaError_t status = cudaGetDriverEntryPointByVersion(
        "cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &found);
    if (status != cudaSuccess || found != cudaDriverEntryPointSuccess || p == nullptr) {
      TVM_FFI_THROW(RuntimeError) << "the CUDA driver has no cuTensorMapEncodeTiled (needs a "
                                  << "CUDA 12 driver or newer)";
    }
    return reinterpret_cast<EncodeTiled>(p);
  }();
  return fn;
}

// rows [rows, K] with `stride` elements between rows, boxes of box_rows x 64, 128B swizzle
CUtensorMap k_major_map(const void* base, DLDataType dtype, int64_t rows, int64_t K,
                        int64_t stride, unsigned box_rows, const char* name) {
  CUtensorMap map;
  const cuuint64_t dims[2] = {cuuint64_t(K), cuuint64_t(rows)};
  const cuuint64_t strides[1] = {cuuint64_t(stride) * 2};
  const cuuint32_t box[2] = {kChunkK, box_rows};
  const cuuint32_t steps[2] = {1, 1};
  const CUresult status = encode_tiled()(
      &map, same_dtype(dtype, kFloat16) ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
      2, const_cast<void*>(base), dims, strides, box, steps, CU_TENSOR_MAP_INTERLEAVE_NONE,
      CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (status != CUDA_SUCCESS) {
    TVM_FFI_THROW(ValueError) << "TMA cannot describe " << name << " (" << rows << " x " << K
                              << ", row stride " << stride << "): cuTensorMapEncodeTiled "
                              << "returned " << int(status);
  }
  return map;
}

int64_t max_shared_bytes(int device) {
  int bytes = 0;
  check_cuda_status(
      cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, device),
      "reading the shared-memory limit");
  return bytes;
}

template <typename T, int kGroups>
void launch(const HeadMaps& maps, const void* bias, TensorView out, int64_t M, int64_t K, int64_t V,
            const DeviceScope& scope) {
  const int smem_bytes = int(sizeof(SharedStorage<T>)) + 1024;  // + the 1024-byte alignment
  // once per device: the opt-in to more than 48 KB of shared memory
  static std::atomic<uint64_t> opted_in{0};
  const uint64_t bit = uint64_t(1) << (scope.device_id() % 64);
  if (!(opted_in.load(std::memory_order_acquire) & bit)) {
    if (max_shared_bytes(scope.device_id()) < smem_bytes) {
      TVM_FFI_THROW(RuntimeError) << "the one-kernel head needs " << smem_bytes
                                  << " bytes of shared memory a block; this GPU has less";
    }
    check_cuda_status(cudaFuncSetAttribute(log_softmax_head_kernel<T, kGroups>,
                                           cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           smem_bytes),
                      "setting the head kernel's shared memory");
    opted_in.fetch_or(bit, std::memory_order_release);
  }
  const dim3 grid(unsigned((M + kRows - 1) / kRows));
  log_softmax_head_kernel<T, kGroups><<<grid, kGroups * 128, smem_bytes, scope.stream()>>>(
      maps, static_cast<const T*>(bias), reinterpret_cast<T*>(data_bytes(out)), int(M), int(K),
      int(V));
  OASR_CHECK_LAUNCH("the one-kernel head");
}

// out [M, V] (contiguous, 16-byte aligned) = log_softmax(a [M, K] · b [V, K]ᵀ + bias [V]):
// a's rows with any 16-byte-multiple stride and a unit column stride, b contiguous, V <= 512,
// K a multiple of 8 and at least 1; sm_90 only.
void log_softmax_head_sm90(TensorView out, TensorView a, TensorView b, OptionalTensor bias) {
  DeviceScope scope(out);
  scope.check_same_device(a, "A");
  scope.check_same_device(b, "B");
  check_dtype(out, {kFloat16, kBFloat16}, "out");
  check_same_dtype(a, "A", out, "out");
  check_same_dtype(b, "B", out, "out");
  check_ndim(out, 2, "out");
  check_ndim(a, 2, "A");
  check_ndim(b, 2, "B");
  const int64_t M = a.size(0), K = a.size(1), V = b.size(0);
  check_size(b, 1, K, "B");
  check_size(out, 0, M, "out");
  check_size(out, 1, V, "out");
  check_contiguous(out, "out");
  check_contiguous(b, "B");
  check_last_dim_contiguous(a, "A");
  if (reinterpret_cast<uintptr_t>(data_bytes(out)) % 16 != 0) {  // rows of any length: the
    TVM_FFI_THROW(ValueError) << "out must start on 16 bytes (the CTAs copy their rows out in "
                              << "16-byte pieces); pass a fresh tensor";  // spans are 128 V bytes
  }
  check_aligned_16(a, "A");
  check_aligned_16(b, "B");
  if (V < 1 || V > kCols) {
    TVM_FFI_THROW(ValueError) << "the one-kernel head takes 1 to " << kCols << " columns, got V = "
                              << V << "; larger vocabularies take the two-pass route";
  }
  if (K < 1 || K % 8 != 0) {
    TVM_FFI_THROW(ValueError) << "the one-kernel head needs K a positive multiple of 8 (TMA "
                              << "rows of 16-byte multiples), got K = " << K;
  }
  if (M >= (int64_t(1) << 31)) TVM_FFI_THROW(ValueError) << "A has 2^31 rows or more";
  const void* bias_ptr = nullptr;
  if (bias.has_value()) {
    scope.check_same_device(*bias, "bias");
    check_same_dtype(*bias, "bias", out, "out");
    check_ndim(*bias, 1, "bias");
    check_size(*bias, 0, V, "bias");
    check_contiguous(*bias, "bias");
    bias_ptr = data_bytes(*bias);
  }
  check_no_overlap(out, "out", a, "A");
  check_no_overlap(out, "out", b, "B");
  if (bias.has_value()) check_no_overlap(out, "out", *bias, "bias");
  int major = 0;
  check_cuda_status(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor,
                                           scope.device_id()),
                    "reading the compute capability");
  if (major != 9) {
    TVM_FFI_THROW(RuntimeError) << "the one-kernel head runs on sm_90 (wgmma, TMA); this GPU is "
                                << "sm_" << major << "x: use the two-pass route";
  }
  if (M == 0) return;
  const HeadMaps maps{
      k_major_map(data_bytes(a), a.dtype(), M, K, a.size(0) > 1 ? a.stride(0) : K, kRows, "A"),
      k_major_map(data_bytes(b), b.dtype(), V, K, K, kGroupCols, "B")};
  OASR_DISPATCH_HALF_DTYPE(out.dtype(), "out", T, [&] {
    if (V > kGroupCols) {
      launch<T, 2>(maps, bias_ptr, out, M, K, V, scope);
    } else {
      launch<T, 1>(maps, bias_ptr, out, M, K, V, scope);
    }
  });
}

}  // namespace

TVM_FFI_DLL_EXPORT_TYPED_FUNC(log_softmax_head_sm90, log_softmax_head_sm90);
