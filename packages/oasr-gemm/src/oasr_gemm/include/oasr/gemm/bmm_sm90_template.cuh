// The tuned lane of `bmm`: CUTLASS 3.x TMA + wgmma in batched mode (the problem's L), for
// operands TMA can read: every batch really stored (no stride-0 broadcast), and pointers, leading
// dimensions, contiguous extents and batch strides multiples of 8 elements (16 bytes).
//
//   D[l] = A[l] · B[l],   A[l] [M, K] row-major, B[l] [K, N] row-major (kBRowMajor: unit stride
//   along N) or column-major (unit stride along K, e.g. keys.transpose(-1, -2)), D[l] [M, N]
//
// fp32 accumulation; no C is read (the epilogue's source is void). The tile and schedule are
// template arguments, one rendered translation unit each (templates/bmm_sm90.cu.jinja); the
// launcher (csrc/bmm_launcher.h) picks the tile by the problem's size.
#pragma once

#include <cuda_runtime.h>

#include <cute/tensor.hpp>
#include <cutlass/cutlass.h>
#include <cutlass/epilogue/collective/collective_builder.hpp>
#include <cutlass/gemm/collective/collective_builder.hpp>
#include <cutlass/gemm/device/gemm_universal_adapter.h>
#include <cutlass/gemm/kernel/gemm_universal.hpp>

#include <type_traits>

#include "oasr/gemm/gemm_problem.h"
#include "oasr/gemm/sm90_kernel.cuh"

namespace oasr::gemm {

template <typename T, int kTileM, int kTileN, int kTileK, bool kCooperative, bool kBRowMajor>
struct Sm90Bmm {
  static constexpr int kAlign = 16 / sizeof(T);
  using TileShape = cute::Shape<cute::Int<kTileM>, cute::Int<kTileN>, cute::Int<kTileK>>;
  using ClusterShape = cute::Shape<cute::_1, cute::_1, cute::_1>;
  using LayoutB =
      std::conditional_t<kBRowMajor, cutlass::layout::RowMajor, cutlass::layout::ColumnMajor>;
  using KernelSchedule = typename Sm90Schedules<kCooperative>::Kernel;
  using EpilogueSchedule = typename Sm90Schedules<kCooperative>::Epilogue;
  using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float, /*ElementC=*/void,
      cutlass::layout::RowMajor, kAlign, T, cutlass::layout::RowMajor, kAlign,
      EpilogueSchedule>::CollectiveOp;
  using CollectiveMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, T, cutlass::layout::RowMajor, kAlign, T,
      LayoutB, kAlign, float, TileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
          sizeof(typename CollectiveEpilogue::SharedStorage))>,
      KernelSchedule>::CollectiveOp;
  using Kernel = cutlass::gemm::kernel::GemmUniversal<cute::Shape<int, int, int, int>,
                                                      CollectiveMainloop, CollectiveEpilogue>;
  using Adapter = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;

  static typename Adapter::Arguments arguments(const BmmProblem<T>& p) {
    using StrideA = typename Kernel::StrideA;
    using StrideB = typename Kernel::StrideB;
    using StrideC = typename Kernel::StrideC;
    using StrideD = typename Kernel::StrideD;
    // (M, K, L), (N, K, L), (M, N, L) strides; the unit ones are static
    StrideA stride_a{p.lda, cute::Int<1>{}, p.batch_stride_a};
    StrideB stride_b;
    if constexpr (kBRowMajor) {
      stride_b = StrideB{cute::Int<1>{}, p.ldb, p.batch_stride_b};
    } else {
      stride_b = StrideB{p.ldb, cute::Int<1>{}, p.batch_stride_b};
    }
    StrideC stride_c{p.ldd, cute::Int<1>{}, p.batch_stride_d};
    StrideD stride_d{p.ldd, cute::Int<1>{}, p.batch_stride_d};
    typename Adapter::Arguments args{cutlass::gemm::GemmUniversalMode::kGemm,
                                     {p.m, p.n, p.k, p.batch},
                                     {p.a, stride_a, p.b, stride_b},
                                     {{}, nullptr, stride_c, p.d, stride_d}};
    args.hw_info.device_id = p.device;
    args.hw_info.sm_count = p.num_sms;
    args.epilogue.thread.alpha = 1.0f;
    args.epilogue.thread.beta = 0.0f;
    return args;
  }

  static LaunchResult run(const BmmProblem<T>& p, cudaStream_t stream) {
    return run_sm90<Adapter>(arguments(p), stream);
  }
};

}  // namespace oasr::gemm
