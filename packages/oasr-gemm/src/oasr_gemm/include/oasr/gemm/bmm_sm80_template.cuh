// The general lane of `bmm`: CUTLASS 2.x GemmUniversal in batched mode, one kernel per
// (dtype, B layout, alignment), for operands TMA cannot read (odd extents, stride-0 broadcast
// batches, B contiguous along K or along N).
//
//   D[l] = A[l] · B[l],   A[l] [M, K] row-major, B[l] [K, N] row- or column-major, D[l] [M, N]
//
// Each operand has its own batch stride (0: broadcast). fp32 accumulation. Two alignments
// (elements), each the widest its operands' pointers, leading dimensions, contiguous extents and
// batch strides allow (csrc/bmm_launcher.h picks them):
//  * kAlignAB, of the A and B loads: 8, 4 or 2 run the mma.sync tensor-op kernel; cp.async cannot
//    move a 2-byte piece, so 1 runs a SIMT kernel;
//  * kAlignC, of the output stores: 8, 4, 2 or 1, so an odd N (Zipformer's 2T - 1 position
//    extent) still runs on tensor cores, storing one element at a time.
#pragma once

#include <cuda_runtime.h>

#include <cutlass/cutlass.h>
#include <cutlass/epilogue/thread/linear_combination.h>
#include <cutlass/gemm/device/gemm_universal.h>
#include <cutlass/gemm/threadblock/threadblock_swizzle.h>

#include <type_traits>

#include "oasr/gemm/gemm_problem.h"

namespace oasr::gemm {

// The tensor-op tile (kTileM x kTileN x 32, warps of kWarpM x kWarpN, kTensorOpStages) is a
// parameter: the launcher runs the defaults, or 128 x 128 (warps of 64 x 64) for large q · kT
// products (bmm_launcher.h, wide_bmm_tile).
template <typename T, bool kBRowMajor, int kAlignAB, int kAlignC, int kTileM = 64,
          int kTileN = 64, int kWarpM = 32, int kWarpN = 32, int kTensorOpStages = 3>
struct Sm80Bmm {
  static constexpr bool kTensorOp = kAlignAB >= 2;
  static_assert(kTensorOp || kAlignC == 1, "the SIMT kernel stores one element at a time");
  using LayoutB =
      std::conditional_t<kBRowMajor, cutlass::layout::RowMajor, cutlass::layout::ColumnMajor>;
  using OpClass = std::conditional_t<kTensorOp, cutlass::arch::OpClassTensorOp,
                                     cutlass::arch::OpClassSimt>;
  using Arch = std::conditional_t<kTensorOp, cutlass::arch::Sm80, cutlass::arch::Sm50>;
  // 64 x 64 tiles by default: the Zipformer shapes this lane exists for have K and N of 4 to a
  // few hundred
  using ThreadblockShape =
      std::conditional_t<kTensorOp, cutlass::gemm::GemmShape<kTileM, kTileN, 32>,
                         cutlass::gemm::GemmShape<64, 64, 8>>;
  using WarpShape = std::conditional_t<kTensorOp, cutlass::gemm::GemmShape<kWarpM, kWarpN, 32>,
                                       cutlass::gemm::GemmShape<32, 32, 8>>;
  using InstructionShape = std::conditional_t<kTensorOp, cutlass::gemm::GemmShape<16, 8, 16>,
                                              cutlass::gemm::GemmShape<1, 1, 1>>;
  static constexpr int kStages = kTensorOp ? kTensorOpStages : 2;
  using Epilogue = cutlass::epilogue::thread::LinearCombination<T, kAlignC, float, float>;
  using Gemm = cutlass::gemm::device::GemmUniversal<
      T, cutlass::layout::RowMajor, T, LayoutB, T, cutlass::layout::RowMajor, float, OpClass,
      Arch, ThreadblockShape, WarpShape, InstructionShape, Epilogue,
      cutlass::gemm::threadblock::GemmIdentityThreadblockSwizzle<>, kStages, kAlignAB, kAlignAB>;

  static cutlass::Status run(const BmmProblem<T>& p, cudaStream_t stream) {
    typename Gemm::Arguments args(cutlass::gemm::GemmUniversalMode::kBatched,
                                  {p.m, p.n, p.k}, p.batch, {1.0f, 0.0f}, p.a, p.b, p.d, p.d,
                                  p.batch_stride_a, p.batch_stride_b, p.batch_stride_d,
                                  p.batch_stride_d, p.lda, p.ldb, p.ldd, p.ldd);
    Gemm gemm;
    cutlass::Status status = gemm.can_implement(args);
    if (status != cutlass::Status::kSuccess) return status;
    // batched mode needs no workspace; a null one is what the launcher can give
    if (Gemm::get_workspace_size(args) != 0) return cutlass::Status::kErrorWorkspaceNull;
    status = gemm.initialize(args, nullptr, stream);
    if (status != cutlass::Status::kSuccess) return status;
    return gemm.run(stream);
  }
};

}  // namespace oasr::gemm
