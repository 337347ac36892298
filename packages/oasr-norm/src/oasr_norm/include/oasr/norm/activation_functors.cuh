// Elementwise activations in float, shared by the activation kernels and the norm epilogues.
// The Activation codes are part of the launcher ABI: oasr_norm._checks.NORM_ACTIVATIONS lists
// the same names in the same order.
#pragma once

#include <type_traits>

#include "oasr/common/types.h"

namespace oasr::norm {

enum class Activation : int {
  kNone = 0,
  kSwish = 1,     // x * sigmoid(x)  (SiLU)
  kRelu = 2,
  kGelu = 3,      // exact: 0.5 x (1 + erf(x / sqrt(2)))
  kGeluTanh = 4,  // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
  kSigmoid = 5,
  kTanh = 6,
  kSwooshL = 7,   // Zipformer: log(1 + e^(x-4)) - 0.08 x - 0.035
  kSwooshR = 8,   // Zipformer: log(1 + e^(x-1)) - 0.08 x - 0.313261687
  kCount = 9,
};

// log(1 + e^z) = max(z, 0) + log(1 + e^-|z|) without overflow, on the hardware exp2/log2
// (7 PTX instructions; log1pf(expf(z)) is ~70 and made the 16-bit Swoosh kernels compute-bound:
// a memory-bound fp16 kernel on the H200 has ~40 instructions per element at 75% of copy
// bandwidth). Absolute error <= ~3e-7 (__log2f is absolute-accurate to 2^-22 on [1, 2]), which
// is what Swoosh's -0.08 x - 0.035 sees; matches torch.logaddexp(0, z) to that, not to an ulp of
// tiny results (z << 0).
OASR_DEVICE float softplus(float z) {
  const float u = exp2f(-fabsf(z) * 1.44269504088896341f);  // e^-|z| in (0, 1]
  return fmaxf(z, 0.0f) + __log2f(1.0f + u) * 0.69314718055994531f;
}

// 1 / d on MUFU.RCP without the IEEE rounding step (rcp.approx.f32, not .ftz): __frcp_rn's range
// test, branch and Newton step made swish / sigmoid / gelu_tanh 4-8% slower at 8000 x 2048 and
// 11% at 250 x 2048 (activation_rcp.cu). Unlike __fdividef, which returns 0 for d > 2^126 (x in
// (-88.7, -87.3) for swish: normal bf16 / fp32 results), the non-ftz form scales such d first and
// keeps the subnormal reciprocal. Every bf16 input gives __frcp_rn's bits; two fp16 inputs of
// sigmoid and gelu_tanh are 1 ulp apart.
OASR_DEVICE float rcp_approx(float d) {
  float r;
  asm("rcp.approx.f32 %0, %1;" : "=f"(r) : "f"(d));
  return r;
}

template <Activation kAct>
OASR_DEVICE float activate(float x) {
  if constexpr (kAct == Activation::kNone) {
    return x;
  } else if constexpr (kAct == Activation::kSwish) {
    return x * rcp_approx(1.0f + __expf(-x));  // fast exp: ~2 ulp, far below a 16-bit ulp
  } else if constexpr (kAct == Activation::kRelu) {
    return x < 0.0f ? 0.0f : x;  // NaN passes through, as in torch.relu
  } else if constexpr (kAct == Activation::kGelu) {
    return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
  } else if constexpr (kAct == Activation::kGeluTanh) {
    // 0.5 x (1 + tanh(u)) = x * sigmoid(2u): one exponential, no cancellation for u << 0
    const float u = 0.79788456080286536f * (x + 0.044715f * x * x * x);
    return x * rcp_approx(1.0f + __expf(-2.0f * u));
  } else if constexpr (kAct == Activation::kSigmoid) {
    return rcp_approx(1.0f + __expf(-x));
  } else if constexpr (kAct == Activation::kTanh) {
    return tanhf(x);
  } else if constexpr (kAct == Activation::kSwooshL) {
    return softplus(x - 4.0f) - 0.08f * x - 0.035f;
  } else {
    static_assert(kAct == Activation::kSwooshR, "unhandled Activation");
    return softplus(x - 1.0f) - 0.08f * x - 0.313261687f;
  }
}

// The activation chosen at run time (a uniform branch: every thread of a launch takes the same
// arm), for epilogues where one more template axis would multiply the instantiations.
OASR_DEVICE float activate(Activation act, float x) {
  switch (act) {
    case Activation::kSwish: return activate<Activation::kSwish>(x);
    case Activation::kRelu: return activate<Activation::kRelu>(x);
    case Activation::kGelu: return activate<Activation::kGelu>(x);
    case Activation::kGeluTanh: return activate<Activation::kGeluTanh>(x);
    case Activation::kSigmoid: return activate<Activation::kSigmoid>(x);
    case Activation::kTanh: return activate<Activation::kTanh>(x);
    case Activation::kSwooshL: return activate<Activation::kSwooshL>(x);
    case Activation::kSwooshR: return activate<Activation::kSwooshR>(x);
    default: return x;
  }
}

// Calls f(std::integral_constant<Activation, kAct>{}) for `act` (kNone for kNone or an unknown
// code): the caller's code is compiled once per activation and the choice is made once, outside
// its loops (the row norms per row, the activation launcher per call).
template <typename F>
OASR_HOST_DEVICE void with_activation(Activation act, F&& f) {
  using A = Activation;
  switch (act) {
    case A::kSwish: f(std::integral_constant<A, A::kSwish>{}); break;
    case A::kRelu: f(std::integral_constant<A, A::kRelu>{}); break;
    case A::kGelu: f(std::integral_constant<A, A::kGelu>{}); break;
    case A::kGeluTanh: f(std::integral_constant<A, A::kGeluTanh>{}); break;
    case A::kSigmoid: f(std::integral_constant<A, A::kSigmoid>{}); break;
    case A::kTanh: f(std::integral_constant<A, A::kTanh>{}); break;
    case A::kSwooshL: f(std::integral_constant<A, A::kSwooshL>{}); break;
    case A::kSwooshR: f(std::integral_constant<A, A::kSwooshR>{}); break;
    default: f(std::integral_constant<A, A::kNone>{}); break;
  }
}

}  // namespace oasr::norm
