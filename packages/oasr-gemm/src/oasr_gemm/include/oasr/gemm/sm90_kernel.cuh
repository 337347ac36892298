// What the family's sm90 templates (gemm_sm90_template.cuh, bmm_sm90_template.cuh) share: the
// schedules of a config and the launch of a CUTLASS 3.x kernel.
#pragma once

#include <cuda_runtime.h>

#include <cutlass/cutlass.h>
#include <cutlass/epilogue/collective/collective_builder.hpp>
#include <cutlass/gemm/collective/collective_builder.hpp>

#include <type_traits>

#include "oasr/gemm/gemm_problem.h"

namespace oasr::gemm {

// Ping-pong (two consumer warpgroups take alternate tiles) or cooperative (both split one tile's
// M): the mainloop's kernel schedule and the epilogue's that goes with it.
template <bool kCooperative>
struct Sm90Schedules {
  using Kernel =
      std::conditional_t<kCooperative, cutlass::gemm::KernelTmaWarpSpecializedCooperative,
                         cutlass::gemm::KernelTmaWarpSpecializedPingpong>;
  using Epilogue =
      std::conditional_t<kCooperative, cutlass::epilogue::TmaWarpSpecializedCooperative,
                         cutlass::epilogue::TmaWarpSpecialized>;
};

// Checks and launches a GemmUniversalAdapter: kUnsupported when CUTLASS refuses the problem or
// the config would need a workspace (the persistent data-parallel scheduler needs none; a config
// that did would need the caller to pass one), before anything is launched.
template <typename Adapter>
LaunchResult run_sm90(const typename Adapter::Arguments& args, cudaStream_t stream) {
  Adapter gemm;
  if (gemm.can_implement(args) != cutlass::Status::kSuccess) return LaunchResult::kUnsupported;
  if (Adapter::get_workspace_size(args) != 0) return LaunchResult::kUnsupported;
  if (gemm.initialize(args, nullptr, stream) != cutlass::Status::kSuccess) {
    return LaunchResult::kCudaError;
  }
  return gemm.run(stream) == cutlass::Status::kSuccess ? LaunchResult::kOk
                                                       : LaunchResult::kCudaError;
}

}  // namespace oasr::gemm
