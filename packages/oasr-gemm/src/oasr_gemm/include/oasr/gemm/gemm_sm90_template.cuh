// The sm90 GEMM of one config: CUTLASS 3.x collective builders over TMA and wgmma.
//
//   D[M, N] = act(A[M, K] · B[N, K]ᵀ + bias[N] (+ C[M, N]))
//
// A and B row-major with their own row strides (B is nn.Linear's weight: column-major K x N to
// CUTLASS), D row-major, bias per column (broadcast over rows; null: none), fp32 accumulation and
// epilogue, the activation compiled in (gemm_activation.cuh). The config (tile, cluster,
// schedule), the activation and whether the kernel adds a matrix C (its own row stride) are
// template arguments: each rendered translation unit instantiates one
// (templates/gemm_sm90.cu.jinja; the kernels with C are modules of their own, _jit.py).
//
// Why C is a template argument: CUTLASS's LinCombPerColBiasEltAct computes beta * C + (alpha *
// acc + bias) for every element; without a C it clears C's registers and still converts and
// adds them (two FMA-pipe instructions an element), and the collective keeps its C path (a
// barrier wait and shared-memory loads behind predicates in every epilogue subtile). A kernel
// without C computes act(acc + bias) (one FADD: the bits alpha = 1's FFMA gave) and has no C path.
// H200, fp16, 8000 x 2048 x 256 with a bias (each epilogue timed on the same tile structures):
// identity 24.2-24.6 -> 22.3-22.6 us on the cooperative 128 x 256 tile and 24.7-25.1 ->
// 21.5-22.0 on ping-pong 128 x 128; Swish 31.1-31.4 -> 29.3-29.6 and 33.1-33.9 -> 29.1-29.5. One
// kernel adding C when a run-time flag said so (a branch per fragment) kept the C path and most
// of the cost: 31.0-31.4 us with Swish's paired reciprocals.
#pragma once

#include <cuda_runtime.h>

#include <type_traits>

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

namespace fusion = cutlass::epilogue::fusion;

// act(acc + bias[col]) in fp32, D in T: the bias a row of N broadcast over the rows (a null
// pointer reads as zeros), no C
constexpr auto kRoundToNearest = cutlass::FloatRoundStyle::round_to_nearest;
template <template <class> class Activation, class T, class TileShape>
using BiasActEpilogue = fusion::Sm90EVT<
    fusion::Sm90Compute<Activation, T, float, kRoundToNearest>,
    fusion::Sm90EVT<fusion::Sm90Compute<cutlass::plus, float, float, kRoundToNearest>,
                    fusion::Sm90AccFetch,
                    fusion::Sm90RowBroadcast<0, TileShape, T, float,
                                             cute::Stride<cute::_0, cute::_1, int64_t>>>>;

template <typename T, int kTileM, int kTileN, int kTileK, int kClusterM, int kClusterN,
          bool kCooperative, template <class> class Activation, bool kWithC>
struct Sm90Gemm {
  using Element = T;
  static constexpr int kAlign = 16 / sizeof(T);
  using TileShape = cute::Shape<cute::Int<kTileM>, cute::Int<kTileN>, cute::Int<kTileK>>;
  using ClusterShape = cute::Shape<cute::Int<kClusterM>, cute::Int<kClusterN>, cute::_1>;
  using KernelSchedule = typename Sm90Schedules<kCooperative>::Kernel;
  using EpilogueSchedule = typename Sm90Schedules<kCooperative>::Epilogue;
  using ElementC = std::conditional_t<kWithC, T, void>;
  // with C: act(beta C + (alpha acc + bias)), alpha = beta = 1
  using Fusion = std::conditional_t<
      kWithC,
      fusion::LinCombPerColBiasEltAct<Activation, T, float, /*ElementBias=*/T,
                                      /*ElementSource=*/T, /*ElementScalar=*/float>,
      BiasActEpilogue<Activation, T, TileShape>>;
  using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float, ElementC,
      cutlass::layout::RowMajor, kAlign, T, cutlass::layout::RowMajor, kAlign, EpilogueSchedule,
      Fusion>::CollectiveOp;
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
    if constexpr (kWithC) {
      auto& thread = args.epilogue.thread;
      thread.alpha = 1.0f;
      thread.beta = 1.0f;
      thread.bias_ptr = p.bias;
    } else {
      args.epilogue.thread = {{{}, {p.bias, T(0), {}}, {}}, {}};  // {{acc, bias, +}, act}
    }
    return args;
  }

  // the launcher routes a call by its C (launch_gemm's with_c); this cannot see another
  static LaunchResult run(const GemmProblem<T>& p, cudaStream_t stream) {
    return run_sm90<Adapter>(arguments(p), stream);
  }
};

}  // namespace oasr::gemm
