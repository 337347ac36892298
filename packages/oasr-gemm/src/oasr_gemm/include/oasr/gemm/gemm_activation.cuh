// The GEMM epilogue's activation, chosen at run time: one kernel per tile and dtype serves
// identity, ReLU, Swish, exact-erf GELU and tanh GELU (CUTLASS's Sm90Compute passes a functor's
// `Arguments` to it when the functor defines them).
#pragma once

#include <cutlass/array.h>
#include <cutlass/cutlass.h>

namespace oasr::gemm {

// Values of GemmActivationArgs::kind; oasr_gemm.gemm.ACTIVATIONS holds the same numbering.
enum class Activation : int { kIdentity = 0, kRelu = 1, kSwish = 2, kGelu = 3, kGeluTanh = 4 };

struct GemmActivationArgs {
  int kind = 0;
};

CUTLASS_DEVICE float activate(float x, int kind) {
  switch (static_cast<Activation>(kind)) {
    case Activation::kRelu:
      return x > 0.0f ? x : 0.0f;
    case Activation::kSwish:
      return x / (1.0f + expf(-x));
    case Activation::kGelu:
      return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
    case Activation::kGeluTanh: {
      const float inner = 0.79788456080286536f * (x + 0.044715f * x * x * x);
      return 0.5f * x * (1.0f + tanhf(inner));
    }
    default:
      return x;
  }
}

template <class T>
struct RuntimeActivation {
  using Arguments = GemmActivationArgs;
  CUTLASS_DEVICE T operator()(T const& x, Arguments const& args) const {
    return T(activate(float(x), args.kind));
  }
};

template <class T, int N>
struct RuntimeActivation<cutlass::Array<T, N>> {
  using Arguments = GemmActivationArgs;
  CUTLASS_DEVICE cutlass::Array<T, N> operator()(cutlass::Array<T, N> const& x,
                                                 Arguments const& args) const {
    cutlass::Array<T, N> y;
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < N; ++i) y[i] = T(activate(float(x[i]), args.kind));
    return y;
  }
};

}  // namespace oasr::gemm
