// The softmax kernels' arithmetic (oasr/common/softmax.cuh).
//
// exp(x - m) is exp2((x - m) * log2e) with the hardware exp2. x - m is exact for the values that
// matter (Sterbenz), so the row's maximum gives exactly 1, as torch: folding m * log2e into one
// FFMA instead leaves its rounding in every term, which cancels in e / s but not in log(s).
#pragma once

#include "oasr/common/types.h"

namespace oasr {

constexpr float kLog2e = 1.44269504088896341f;

// 2^x on the MUFU alone (ex2.approx.ftz): a result below 2^-126 (x < -126) is 0. exp2f keeps
// those as subnormals with a range test and two predicated multiplies around the MUFU, four
// instructions for one, and the short-row kernels are bound by instructions as much as by bytes
// (softmax over 250 keys: 27 instructions a value). A row's terms are exp(v - max) <= 1 and its
// sum >= 1, so each flushed term moves the sum, and the outputs, by less than 2^-126 relative.
OASR_DEVICE float softmax_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// 1 / x on the MUFU alone (rcp.approx.ftz), for x the caller knows lies in [2^-126, 2^126]:
// __fdividef tests for a subnormal divisor and rescales around the MUFU, three instructions.
OASR_DEVICE float rcp_approx_ftz(float x) {
  float y;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

}  // namespace oasr
