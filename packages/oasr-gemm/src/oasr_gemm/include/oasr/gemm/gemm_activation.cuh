// The GEMM epilogue's activations, compiled in: one kernel per (config, dtype, activation).
//
// Measured on the H200 (packages/oasr-gemm/benchmarks/experiments/epilogue_cost.cu, fp16,
// 8000x2048x256 with a bias): a plain GEMM with the identity compiled in took 24.3 us where the
// run-time switch over five activations took 25.5 us without a bias; bias + Swish 32.3 us where
// the switch took 35.4 us (cooperative 256x128; ping-pong 128x128: 36.1 against 42.6 us). So
// each activation is its own instantiation, in its own module built on first use (_jit.py).
//
// Swish and tanh-GELU take two MUFU operations per element, ex2 and the reciprocal of
// __fdividef: their fp32 error is a few thousandths of an fp16 ulp. The epilogue's cost at small
// K is those MUFU operations (16 per clock per SM: about 8 us for 16M outputs) and the issue
// slots around them. The exponential is the core's softmax_exp2 (ex2.approx.ftz): __expf's
// ex2.approx without .ftz adds three instructions an element to keep results below 2^-126,
// which 1 + e rounds away, so the outputs are the same bits (session 24 on the H200: every production config, both dtypes and
// both activations, bitwise; benchmarks/experiments/epilogue_cost.cu: 2.5-6.5% off linear +
// Swish at K 256 and 512 on three tile structures; `oasr bench gemm --filter swish`: 0-6.5%,
// geometric mean of its eight cases 1.25x -> 1.28x PyTorch). A one-MUFU sigmoid through
// tanh.approx was 60 fp16 ulps off for negative inputs; an ex2 + Newton reciprocal for every
// element cost more issue slots than the MUFU it saved, and for two to six of every eight
// elements it gained 1-2% on the cooperative tiles but lost 13-18% on ping-pong 128x128 at
// 32000x2048x512.
#pragma once

#include <cutlass/array.h>
#include <cutlass/cutlass.h>
#include <cutlass/epilogue/thread/activation.h>

#include "oasr/common/softmax.cuh"  // softmax_exp2, rcp_approx_ftz: MUFU.EX2 / MUFU.RCP alone

namespace oasr::gemm {

struct Relu {
  CUTLASS_DEVICE float operator()(float x) const { return x > 0.0f ? x : 0.0f; }
};
// x * sigmoid(x)
struct Swish {
  CUTLASS_DEVICE float operator()(float x) const {
    return __fdividef(x, 1.0f + softmax_exp2(x * -kLog2e));
  }
};
// Exact GELU, x * Phi(x), through the normal tail: Phi(-a) = e^(-a^2/2) * P(a) / Q(a), a = |x|,
// so GELU(x) = max(x, 0) - a * Phi(-a) for either sign. P / Q (degrees 3 / 4) is a minimax fit
// of Phi(-a) e^(a^2/2) on [0, 10] with relative error 2.2e-7 (it falls like 1 / (a sqrt(2 pi))
// past there, as the fit does; from |x| 13.2 the ftz exponential is 0 and GELU is max(x, 0)).
// 14 FMA-pipe instructions and two MUFU, where erff's form took ~28 and one: at the
// power-limited Whisper MLP shape the epilogue's instructions cost time even where ping-pong
// hides their latency (H200, 48000 x 5120 x 1280: 1153-1211 -> 1028-1034 us fp16). It is also
// more accurate: 0.5 x (1 + erf(x / sqrt 2)) cancels for x < 0 (2e-3 relative at x = -4, 7e-2
// at -5); this form is within an ulp of float64 for every fp16 and bf16 output at |x| <= 10
// (benchmarks/experiments/gelu_epilogue_accuracy.cu, every fp32 input on the H200).
// a is clamped to 16 so that x = +inf gives inf (not inf * 0); NaN stays NaN through e.
struct Gelu {
  CUTLASS_DEVICE float operator()(float x) const {
    const float a = fminf(fabsf(x), 16.0f);
    const float e = softmax_exp2(x * (x * (-0.5f * kLog2e)));
    const float p = fmaf(fmaf(fmaf(0.0157695189f, a, 0.114056148f), a, 0.352297604f), a,
                         0.499999881f);
    const float q = fmaf(fmaf(fmaf(fmaf(0.0395370983f, a, 0.285595983f), a, 0.927002609f), a,
                              1.50246859f),
                         a, 1.0f);
    return fmaf(-a, e * p * rcp_approx_ftz(q), fmaxf(x, 0.0f));  // q >= 1
  }
};
// 0.5 x (1 + tanh(u)) is x * sigmoid(2u): one exponential, no cancellation near 0
struct GeluTanh {
  CUTLASS_DEVICE float operator()(float x) const {
    const float u = 0.79788456080286536f * (x + 0.044715f * x * x * x);
    return __fdividef(x, 1.0f + softmax_exp2(u * (-2.0f * kLog2e)));
  }
};

// CUTLASS's LinCombPerColBiasEltAct takes the activation as a template over the value type and
// applies its Array form to each fragment (in fp32).
template <class Fn>
struct Elementwise {
  template <class V>
  struct Op {
    CUTLASS_DEVICE V operator()(V const& x) const { return V(Fn{}(float(x))); }
  };
  template <class E, int N>
  struct Op<cutlass::Array<E, N>> {
    CUTLASS_DEVICE cutlass::Array<E, N> operator()(cutlass::Array<E, N> const& x) const {
      cutlass::Array<E, N> y;
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < N; ++i) y[i] = E(Fn{}(float(x[i])));
      return y;
    }
  };
};

// The epilogue activations by name (oasr_gemm._jit.ACTIVATION_FUNCTORS names these).
template <class V>
using IdentityAct = cutlass::epilogue::thread::Identity<V>;
template <class V>
using ReluAct = Elementwise<Relu>::Op<V>;
template <class V>
using SwishAct = Elementwise<Swish>::Op<V>;
template <class V>
using GeluAct = Elementwise<Gelu>::Op<V>;
template <class V>
using GeluTanhAct = Elementwise<GeluTanh>::Op<V>;

}  // namespace oasr::gemm
