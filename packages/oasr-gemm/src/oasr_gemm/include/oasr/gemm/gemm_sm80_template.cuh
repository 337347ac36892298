// The sm80 lane's GEMM of one config: CUTLASS 2.x mma.sync kernels (the Sm80 tag; they run on
// sm90 as they do on sm80), for the shapes the sm90 TMA kernels leave SMs idle on: M of a few
// hundred rows or less, where a tile grid is smaller than the GPU and splitting K fills it.
//
//   D[M, N] = act(A[M, K] · B[N, K]ᵀ + C),   C: a full matrix, or the bias [N] as a matrix with
//                                            row stride 0, or nothing (beta 0)
//
// A and B row-major with their own row strides (B is nn.Linear's weight: column-major K x N to
// CUTLASS), fp32 accumulation, the activation compiled in (gemm_activation.cuh). How K is split:
//  * kNone: one CTA per output tile;
//  * kSerial: kSlices CTAs per tile, each over a slice of K; they add their partials in turn
//    through D (rounded to T between slices: CUTLASS's serial reduction), the last applies the
//    activation. A semaphore per tile in the workspace orders them;
//  * kParallel: kSlices CTAs per tile write fp32 partials to the workspace; a second kernel
//    adds them and applies the epilogue (GemmSplitKParallel);
//  * kStreamK: CUTLASS's Stream-K kernel: the K iterations of all tiles are shared over the
//    SMs, partial tiles fixed up through the workspace in fp32.
#pragma once

#include <cuda_runtime.h>

#include <cutlass/cutlass.h>
#include <cutlass/epilogue/thread/linear_combination_generic.h>
#include <cutlass/gemm/device/gemm_splitk_parallel.h>
#include <cutlass/gemm/device/gemm_universal.h>
#include <cutlass/gemm/threadblock/threadblock_swizzle.h>
#include <cutlass/gemm/threadblock/threadblock_swizzle_streamk.h>

#include <type_traits>

#include "oasr/gemm/gemm_activation.cuh"
#include "oasr/gemm/gemm_problem.h"

namespace oasr::gemm {

enum class SplitK { kNone, kSerial, kParallel, kStreamK };

template <typename T, int kTileM, int kTileN, int kTileK, int kWarpM, int kWarpN, int kStages,
          SplitK kSplit, int kSlices, template <class> class Activation>
struct Sm80Gemm {
  static constexpr int kAlign = 16 / sizeof(T);
  using LayoutA = cutlass::layout::RowMajor;
  using LayoutB = cutlass::layout::ColumnMajor;
  using LayoutD = cutlass::layout::RowMajor;
  using Tile = cutlass::gemm::GemmShape<kTileM, kTileN, kTileK>;
  using Warp = cutlass::gemm::GemmShape<kWarpM, kWarpN, kTileK>;
  using Instruction = cutlass::gemm::GemmShape<16, 8, 16>;
  // alpha * acc + beta * C, then the activation, in fp32; a serial split's earlier slices skip
  // the activation (set_k_partition)
  using Epilogue =
      cutlass::epilogue::thread::LinearCombinationGeneric<Activation, T, kAlign, float, float>;
  using Swizzle = std::conditional_t<kSplit == SplitK::kStreamK,
                                     cutlass::gemm::threadblock::ThreadblockSwizzleStreamK,
                                     cutlass::gemm::threadblock::GemmIdentityThreadblockSwizzle<>>;
  using Universal = cutlass::gemm::device::GemmUniversal<
      T, LayoutA, T, LayoutB, T, LayoutD, float, cutlass::arch::OpClassTensorOp,
      cutlass::arch::Sm80, Tile, Warp, Instruction, Epilogue, Swizzle, kStages, kAlign, kAlign>;
  // The partials are fp32 (Convert), the second kernel applies Epilogue to their sum and C.
  using Parallel = cutlass::gemm::device::GemmSplitKParallel<
      T, LayoutA, T, LayoutB, T, LayoutD, float, cutlass::arch::OpClassTensorOp,
      cutlass::arch::Sm80, Tile, Warp, Instruction, Epilogue,
      cutlass::epilogue::thread::Convert<float, kAlign, float>,
      cutlass::reduction::thread::ReduceAdd<float, float, kAlign>,
      cutlass::gemm::threadblock::GemmSplitKHorizontalThreadblockSwizzle, kStages, kAlign,
      kAlign>;
  using Device = std::conditional_t<kSplit == SplitK::kParallel, Parallel, Universal>;

  static typename Device::Arguments arguments(const GemmProblem<T>& p) {
    // C: the matrix, or the bias seen as a matrix whose rows are all the bias (stride 0)
    const T* c = p.c ? p.c : (p.bias ? p.bias : p.d);
    const int64_t ldc = p.c ? p.ldc : (p.bias ? 0 : p.ldd);
    const float beta = (p.c || p.bias) ? 1.0f : 0.0f;
    typename Epilogue::Params epilogue(1.0f, beta);
    if constexpr (kSplit == SplitK::kParallel) {
      return typename Device::Arguments(
          {p.m, p.n, p.k}, {p.a, p.lda}, {p.b, p.ldb}, {c, ldc}, {p.d, p.ldd}, epilogue, kSlices);
    } else {
      // kGemm mode: batch_count is the serial split's slices (1: none; Stream-K picks its own)
      return typename Device::Arguments(cutlass::gemm::GemmUniversalMode::kGemm, {p.m, p.n, p.k},
                                        kSplit == SplitK::kSerial ? kSlices : 1, epilogue, p.a,
                                        p.b, c, p.d, 0, 0, 0, 0, p.lda, p.ldb, ldc, p.ldd);
    }
  }

  static size_t workspace_bytes(const GemmProblem<T>& p) {
    return Device::get_workspace_size(arguments(p));
  }

  static LaunchResult run(const GemmProblem<T>& p, cudaStream_t stream) {
    if (p.c && p.bias) return LaunchResult::kUnsupported;  // one source: a matrix or a bias
    const typename Device::Arguments args = arguments(p);
    Device gemm;
    if constexpr (kSplit != SplitK::kParallel) {
      if (gemm.can_implement(args) != cutlass::Status::kSuccess) return LaunchResult::kUnsupported;
    }
    if (Device::get_workspace_size(args) > p.workspace_bytes) return LaunchResult::kWorkspace;
    cutlass::Status status;
    if constexpr (kSplit == SplitK::kParallel) {
      status = gemm.initialize(args, p.workspace);
    } else {
      // zeroes the serial split's semaphores / prepares Stream-K's fix-up flags on `stream`
      status = gemm.initialize(args, p.workspace, stream);
    }
    if (status != cutlass::Status::kSuccess) return LaunchResult::kCudaError;
    return gemm.run(stream) == cutlass::Status::kSuccess ? LaunchResult::kOk
                                                         : LaunchResult::kCudaError;
  }
};

}  // namespace oasr::gemm
