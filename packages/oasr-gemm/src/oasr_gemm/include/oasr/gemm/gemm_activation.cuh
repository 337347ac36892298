// The GEMM epilogue's activation, chosen at run time: one kernel per tile and dtype serves
// identity, ReLU, Swish, exact-erf GELU and tanh GELU (CUTLASS's Sm90Compute passes a functor's
// `Arguments` to it when the functor defines them).
//
// The switch runs once per fragment, outside the element loop: switching per element made the
// identity epilogue 2.8x slower than a compile-time identity on the H200 (8000x2048x256: 79 vs
// 28 us); hoisted it costs 2-7%. Swish and tanh-GELU use __expf and __fdividef: their results
// are rounded to fp16/bf16, where the fast forms' few-ulp fp32 error does not show, and expf
// plus an IEEE division doubled the epilogue's cost.
#pragma once

#include <cutlass/array.h>
#include <cutlass/cutlass.h>

namespace oasr::gemm {

// Values of GemmActivationArgs::kind; oasr_gemm.gemm.ACTIVATIONS holds the same numbering.
enum class Activation : int { kIdentity = 0, kRelu = 1, kSwish = 2, kGelu = 3, kGeluTanh = 4 };

struct GemmActivationArgs {
  int kind = 0;
};

struct Relu {
  CUTLASS_DEVICE float operator()(float x) const { return x > 0.0f ? x : 0.0f; }
};
// x * sigmoid(x)
struct Swish {
  CUTLASS_DEVICE float operator()(float x) const { return __fdividef(x, 1.0f + __expf(-x)); }
};
struct Gelu {
  CUTLASS_DEVICE float operator()(float x) const {
    return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
  }
};
// 0.5 x (1 + tanh(u)) is x * sigmoid(2u): one exponential, no cancellation near 0
struct GeluTanh {
  CUTLASS_DEVICE float operator()(float x) const {
    const float u = 0.79788456080286536f * (x + 0.044715f * x * x * x);
    return __fdividef(x, 1.0f + __expf(-2.0f * u));
  }
};

// CUTLASS looks for `Arguments` on the scalar functor; the epilogue calls the Array one.
template <class T>
struct RuntimeActivation {
  using Arguments = GemmActivationArgs;
};

template <class T, int N>
struct RuntimeActivation<cutlass::Array<T, N>> {
  using Arguments = GemmActivationArgs;
  using Fragment = cutlass::Array<T, N>;

  template <class Fn>
  CUTLASS_DEVICE static Fragment apply(Fragment const& x, Fn fn) {
    Fragment y;
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < N; ++i) y[i] = T(fn(float(x[i])));
    return y;
  }

  CUTLASS_DEVICE Fragment operator()(Fragment const& x, Arguments const& args) const {
    switch (static_cast<Activation>(args.kind)) {
      case Activation::kRelu:
        return apply(x, Relu{});
      case Activation::kSwish:
        return apply(x, Swish{});
      case Activation::kGelu:
        return apply(x, Gelu{});
      case Activation::kGeluTanh:
        return apply(x, GeluTanh{});
      default:
        return x;
    }
  }
};

}  // namespace oasr::gemm
