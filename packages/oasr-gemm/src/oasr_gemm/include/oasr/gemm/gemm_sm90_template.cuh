// The sm90 GEMM of one config: CUTLASS 3.x collective builders over TMA and wgmma.
//
//   D[M, N] = act(A[M, K] · B[N, K]ᵀ + C + bias[N])
//
// A and B row-major with their own row strides (B is nn.Linear's weight: column-major K x N to
// CUTLASS), C (optional, a full matrix with its own row stride) and D row-major, bias per column
// (broadcast over rows; null: none), fp32 accumulation and epilogue, the activation compiled in
// (gemm_activation.cuh). Without C the epilogue's beta is 0 and C is not read (D stands in for
// its pointer). The config (tile, cluster, schedule) and the activation are template arguments:
// each rendered translation unit instantiates one (templates/gemm_sm90.cu.jinja).
#pragma once

#include <cuda_runtime.h>

#include <cute/tensor.hpp>
#include <cutlass/cutlass.h>
#include <cutlass/epilogue/collective/collective_builder.hpp>
#include <cutlass/epilogue/fusion/operations.hpp>
#include <cutlass/gemm/collective/collective_builder.hpp>
#include <cutlass/gemm/device/gemm_universal_adapter.h>
#include <cutlass/gemm/kernel/gemm_universal.hpp>

#include "oasr/gemm/gemm_activation.cuh"
#include "oasr/gemm/gemm_problem.h"
#include "oasr/gemm/sm90_kernel.cuh"

namespace oasr::gemm {

template <typename T, int kTileM, int kTileN, int kTileK, int kClusterM, int kClusterN,
          bool kCooperative, template <class> class Activation>
struct Sm90Gemm {
  using Element = T;
  static constexpr int kAlign = 16 / sizeof(T);
  using TileShape = cute::Shape<cute::Int<kTileM>, cute::Int<kTileN>, cute::Int<kTileK>>;
  using ClusterShape = cute::Shape<cute::Int<kClusterM>, cute::Int<kClusterN>, cute::_1>;
  using KernelSchedule = typename Sm90Schedules<kCooperative>::Kernel;
  using EpilogueSchedule = typename Sm90Schedules<kCooperative>::Epilogue;
  using Fusion = cutlass::epilogue::fusion::LinCombPerColBiasEltAct<
      Activation, T, float, /*ElementBias=*/T, /*ElementSource=*/T, /*ElementScalar=*/float>;
  using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float, T, cutlass::layout::RowMajor,
      kAlign, T, cutlass::layout::RowMajor, kAlign, EpilogueSchedule, Fusion>::CollectiveOp;
  using CollectiveMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, T, cutlass::layout::RowMajor, kAlign, T,
      cutlass::layout::ColumnMajor, kAlign, float, TileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
          sizeof(typename CollectiveEpilogue::SharedStorage))>,
      KernelSchedule>::CollectiveOp;
  using Kernel = cutlass::gemm::kernel::GemmUniversal<cute::Shape<int, int, int, int>,
                                                      CollectiveMainloop, CollectiveEpilogue>;
  using Adapter = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;

  static typename Adapter::Arguments arguments(const GemmProblem<T>& p) {
    using StrideA = typename Kernel::StrideA;
    using StrideB = typename Kernel::StrideB;
    using StrideC = typename Kernel::StrideC;
    using StrideD = typename Kernel::StrideD;
    // (row, col, batch) strides: the row stride is dynamic, the unit stride static
    StrideA stride_a{p.lda, cute::Int<1>{}, int64_t(0)};
    StrideB stride_b{p.ldb, cute::Int<1>{}, int64_t(0)};
    StrideC stride_c{p.c ? p.ldc : p.ldd, cute::Int<1>{}, int64_t(0)};
    StrideD stride_d{p.ldd, cute::Int<1>{}, int64_t(0)};
    typename Adapter::Arguments args{
        cutlass::gemm::GemmUniversalMode::kGemm,
        {p.m, p.n, p.k, 1},
        {p.a, stride_a, p.b, stride_b},
        {{}, p.c ? p.c : p.d, stride_c, p.d, stride_d}};
    args.hw_info.device_id = p.device;
    args.hw_info.sm_count = p.num_sms;  // given, so CUTLASS does not query it on every call
    auto& fusion = args.epilogue.thread;
    fusion.alpha = 1.0f;
    fusion.beta = p.c ? 1.0f : 0.0f;
    fusion.bias_ptr = p.bias;
    return args;
  }

  static LaunchResult run(const GemmProblem<T>& p, cudaStream_t stream) {
    return run_sm90<Adapter>(arguments(p), stream);
  }
};

}  // namespace oasr::gemm
