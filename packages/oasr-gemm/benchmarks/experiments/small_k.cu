// Experiment: why is the sm90 GEMM 0.75-0.85x cuBLAS at small K (K 256)?
// One variant per executable (-DVARIANT=n; see README.md); each times its kernel
// with a plain epilogue (kind 0) and with bias + SiLU compiled in (kind 3) on the small-K shapes
// of the suite. small_k_cublas.py times PyTorch (cuBLAS) on the same shapes. Data are not checked: the
// point is the time of each structure (the production kernels are checked by the tests).
#include <cstdio>
#include <type_traits>

#include <cuda_fp16.h>
#include <cute/tensor.hpp>
#include <cutlass/cutlass.h>
#include <cutlass/epilogue/collective/collective_builder.hpp>
#include <cutlass/epilogue/thread/activation.h>
#include <cutlass/gemm/collective/collective_builder.hpp>
#include <cutlass/gemm/device/gemm_universal_adapter.h>
#include <cutlass/gemm/kernel/gemm_universal.hpp>

using T = cutlass::half_t;
using cute::Int;

// kStages 0: as many as shared memory holds after the epilogue's carve-out
template <int TM, int TN, int TK, int CM, int CN, bool kCoop, bool kNoSmem, int EM, int EN,
          int kStages, int kKind>
struct Variant {
  using TileShape = cute::Shape<Int<TM>, Int<TN>, Int<TK>>;
  using ClusterShape = cute::Shape<Int<CM>, Int<CN>, cute::_1>;
  using KernelSchedule = std::conditional_t<kCoop, cutlass::gemm::KernelTmaWarpSpecializedCooperative,
                                            cutlass::gemm::KernelTmaWarpSpecializedPingpong>;
  using EpiSchedule = std::conditional_t<
      kNoSmem, cutlass::epilogue::NoSmemWarpSpecialized,
      std::conditional_t<kCoop, cutlass::epilogue::TmaWarpSpecializedCooperative,
                         cutlass::epilogue::TmaWarpSpecialized>>;
  using EpiTile = std::conditional_t<EM == 0, cutlass::epilogue::collective::EpilogueTileAuto,
                                     cute::Shape<Int<(EM > 0 ? EM : 1)>, Int<(EN > 0 ? EN : 1)>>>;
  using Fusion = std::conditional_t<
      kKind == 0, cutlass::epilogue::fusion::LinearCombination<T, float, T, float>,
      cutlass::epilogue::fusion::LinCombPerColBiasEltAct<cutlass::epilogue::thread::SiLu, T, float,
                                                         T, T, float>>;
  using Epi = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape, EpiTile, float,
      float, T, cutlass::layout::RowMajor, 8, T, cutlass::layout::RowMajor, 8, EpiSchedule,
      Fusion>::CollectiveOp;
  using Stages = std::conditional_t<
      kStages == 0,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
          sizeof(typename Epi::SharedStorage))>,
      cutlass::gemm::collective::StageCount<(kStages > 0 ? kStages : 2)>>;
  using Main = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, T, cutlass::layout::RowMajor, 8, T,
      cutlass::layout::ColumnMajor, 8, float, TileShape, ClusterShape, Stages,
      KernelSchedule>::CollectiveOp;
  using Kernel = cutlass::gemm::kernel::GemmUniversal<cute::Shape<int, int, int, int>, Main, Epi>;
  using Adapter = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;

  static float time(int m, int n, int k, T* a, T* b, T* bias, T* d, int sms) {
    typename Kernel::StrideA sa{int64_t(k), Int<1>{}, int64_t(0)};
    typename Kernel::StrideB sb{int64_t(k), Int<1>{}, int64_t(0)};
    typename Kernel::StrideC sc{int64_t(n), Int<1>{}, int64_t(0)};
    typename Kernel::StrideD sd{int64_t(n), Int<1>{}, int64_t(0)};
    typename Adapter::Arguments args{cutlass::gemm::GemmUniversalMode::kGemm, {m, n, k, 1},
                                     {a, sa, b, sb}, {{}, d, sc, d, sd}};
    args.hw_info.device_id = 0;
    args.hw_info.sm_count = sms;
    args.epilogue.thread.alpha = 1.f;
    args.epilogue.thread.beta = 0.f;
    if constexpr (kKind != 0) args.epilogue.thread.bias_ptr = bias;
    Adapter g;
    if (g.can_implement(args) != cutlass::Status::kSuccess) return -1;
    if (g.initialize(args, nullptr, 0) != cutlass::Status::kSuccess) return -2;
    for (int i = 0; i < 5; ++i) g.run(0);
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    float best = 1e9f;
    for (int rep = 0; rep < 5; ++rep) {
      cudaEventRecord(e0);
      for (int i = 0; i < 20; ++i) g.run(0);
      cudaEventRecord(e1);
      cudaEventSynchronize(e1);
      float ms;
      cudaEventElapsedTime(&ms, e0, e1);
      best = fminf(best, ms * 1000.f / 20);
    }
    if (cudaGetLastError() != cudaSuccess) return -3;
    return best;
  }
};

// name, tile M N K, cluster M N, cooperative, no-smem epilogue, epilogue tile M N (0: auto), stages
#ifndef VARIANT
#define VARIANT 0
#endif
#if VARIANT == 0
#define V(kind) Variant<128, 128, 64, 1, 1, false, false, 0, 0, 0, kind>
#define NAME "pp 128x128x64 (production default)"
#elif VARIANT == 1
#define V(kind) Variant<128, 128, 64, 1, 1, false, false, 64, 32, 0, kind>
#define NAME "pp 128x128x64 epi 64x32"
#elif VARIANT == 2
#define V(kind) Variant<128, 128, 64, 1, 1, false, false, 0, 0, 4, kind>
#define NAME "pp 128x128x64 4 stages"
#elif VARIANT == 3
#define V(kind) Variant<128, 128, 128, 1, 1, false, false, 0, 0, 0, kind>
#define NAME "pp 128x128x128"
#elif VARIANT == 4
#define V(kind) Variant<128, 256, 64, 1, 1, false, false, 0, 0, 0, kind>
#define NAME "pp 128x256x64"
#elif VARIANT == 5
#define V(kind) Variant<64, 256, 64, 1, 1, false, false, 0, 0, 0, kind>
#define NAME "pp 64x256x64"
#elif VARIANT == 6
#define V(kind) Variant<256, 128, 64, 1, 1, true, false, 0, 0, 0, kind>
#define NAME "coop 256x128x64"
#elif VARIANT == 7
#define V(kind) Variant<128, 256, 64, 1, 1, true, false, 0, 0, 0, kind>
#define NAME "coop 128x256x64"
#elif VARIANT == 8
#define V(kind) Variant<128, 128, 64, 2, 1, false, false, 0, 0, 0, kind>
#define NAME "pp 128x128x64 cluster 2x1"
#elif VARIANT == 9
#define V(kind) Variant<128, 128, 64, 1, 1, false, true, 0, 0, 0, kind>
#define NAME "pp 128x128x64 no-smem epilogue"
#define NO_FUSION 1
#elif VARIANT == 10
#define V(kind) Variant<256, 128, 64, 1, 1, true, false, 128, 32, 0, kind>
#define NAME "coop 256x128x64 epi 128x32"
#endif

int main() {
  int sms;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  const size_t cap = size_t(32000) * 5000;
  T *a, *b, *bias, *d;
  cudaMalloc(&a, cap * 2);
  cudaMalloc(&b, cap * 2);
  cudaMalloc(&bias, 8192 * 2);
  cudaMalloc(&d, cap * 2);
  cudaMemset(a, 0x33, cap * 2);
  cudaMemset(b, 0x22, cap * 2);
  cudaMemset(bias, 0, 8192 * 2);
  const int shapes[][3] = {{8000, 2048, 256}, {8000, 768, 256}, {8000, 5000, 256},
                           {32000, 2048, 512}, {32000, 1536, 512}};
  for (auto& s : shapes) {
    const int m = s[0], n = s[1], k = s[2];
    const double flops = 2.0 * m * n * k;
    float plain = V(0)::time(m, n, k, a, b, bias, d, sms);
#ifdef NO_FUSION
    float fused = 0.f;
#else
    float fused = V(3)::time(m, n, k, a, b, bias, d, sms);
#endif
    printf("%-36s %6dx%5dx%4d  plain %8.2f us (%5.0f TFLOP/s)  bias+silu %8.2f us\n", NAME, m, n,
           k, plain, flops / plain / 1e6, fused);
  }
  return 0;
}
