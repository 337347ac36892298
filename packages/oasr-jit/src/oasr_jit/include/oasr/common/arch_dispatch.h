// The architecture a translation unit targets, and the arch-only instructions behind one helper
// each (so kernels never carry inline `#if __CUDA_ARCH__` blocks).
#pragma once

#include "oasr/common/types.h"

namespace oasr::arch {

// The JIT compiles every module for one architecture and passes it as -DOASR_TARGET_SM=90.
#ifdef OASR_TARGET_SM
inline constexpr int kTargetSm = OASR_TARGET_SM;
#else
inline constexpr int kTargetSm = 0;  // built outside the JIT: no architecture promised
#endif

template <int kMinSm>
inline constexpr bool kTargetAtLeast = kTargetSm >= kMinSm;

// Programmatic dependent launch (sm_90+). A kernel launched with the PDL attribute may start
// before its predecessor finishes; it must wait before reading what the predecessor writes.
// On older targets both calls compile to nothing, which is correct: there is no overlap.
OASR_DEVICE void wait_for_prior_grids() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

OASR_DEVICE void allow_dependent_grids() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;");
#endif
}

// The architecture the device code was compiled for (0 in host code).
OASR_HOST_DEVICE constexpr int compiled_sm() {
#if defined(__CUDA_ARCH__)
  return __CUDA_ARCH__ / 10;
#else
  return 0;
#endif
}

}  // namespace oasr::arch
