// The GEMM epilogue's activations, compiled in: one kernel per (config, dtype, activation).
//
// Measured on the H200 (each epilogue timed on the same tile structures, fp16, 8000x2048x256
// with a bias): a plain GEMM with the identity compiled in took 24.3 us where the
// run-time switch over five activations took 25.5 us without a bias; bias + Swish 32.3 us where
// the switch took 35.4 us (cooperative 256x128; ping-pong 128x128: 36.1 against 42.6 us). So
// each activation is its own instantiation, in its own module built on first use (_jit.py).
//
// Swish and tanh-GELU are x * sigmoid(z): an exponential and a reciprocal, two MUFU operations
// (16 per clock per SM: about 8 us for 16M outputs), and at small K the epilogue is bound by
// them. The exponential is the core's softmax_exp2 (ex2.approx.ftz): __expf's ex2.approx without
// .ftz adds three instructions an element to keep results below 2^-126, which 1 + e rounds away
// (the same output bits on every production config, 2.5-6.5% off linear + Swish at K 256 and
// 512). Two elements share one reciprocal (times_sigmoid_pair below), 1.5
// MUFU operations an element: in the sm90 kernels without C (gemm_sm90_template.cuh), bias +
// Swish at 8000 x 2048 x 256 fp16 went 31.1-31.4 -> 27.7-28.0 us on the cooperative 128 x 256
// tile (29.3-29.6 with one reciprocal an element). Not kept: a one-MUFU sigmoid through
// tanh.approx (60 fp16 ulps off for negative inputs); reciprocals by Newton steps (more issue
// slots than the MUFU saved: 1-2% on cooperative tiles, 13-18% slower on ping-pong).
#pragma once

#include <type_traits>

#include <cutlass/array.h>
#include <cutlass/cutlass.h>
#include <cutlass/epilogue/thread/activation.h>

#include "oasr/common/softmax.cuh"  // softmax_exp2, rcp_approx_ftz: MUFU.EX2 / MUFU.RCP alone

namespace oasr::gemm {

struct Relu {
  CUTLASS_DEVICE float operator()(float x) const { return x > 0.0f ? x : 0.0f; }
};
// x0 * sigmoid(z0) and x1 * sigmoid(z1) with one reciprocal: 1 / d0 = d1 / (d0 d1), d = 1 + e^-z.
// Elementwise applies it to the element pairs (2i, 2i + 1) of the fragments CUTLASS visits, which
// are adjacent columns (an even one and the next) of one row: wgmma's accumulator pairs on sm90,
// 8-column vectors on the sm80 lane. So a row's outputs depend on that row alone (batch
// invariance holds), and an output's last fp32 bit also on its partner column's value.
// e = 2^min(-z log2e, 63) keeps d0 d1 <= 2^126 (rcp_approx_ftz's range) and gives a NaN a finite
// d, so a NaN stays in its own element. Below z = -43.7 the factor is 2^-63 where e^z is meant:
// the output is |x| 1.1e-19 instead of smaller (0 either way in fp16; __fdividef's form flushed
// to 0 from z = -88). Within 0.002 fp16 ulps of float64 on [-30, 30], as the one-element form.
CUTLASS_DEVICE void times_sigmoid_pair(float x0, float z0, float x1, float z1, float& y0,
                                       float& y1) {
  const float d0 = 1.0f + softmax_exp2(fminf(z0 * -kLog2e, 63.0f));
  const float d1 = 1.0f + softmax_exp2(fminf(z1 * -kLog2e, 63.0f));
  const float r = rcp_approx_ftz(d0 * d1);
  y0 = x0 * (r * d1);
  y1 = x1 * (r * d0);
}

// x * sigmoid(x)
struct Swish {
  static constexpr bool kPairs = true;
  CUTLASS_DEVICE float operator()(float x) const {
    return __fdividef(x, 1.0f + softmax_exp2(x * -kLog2e));
  }
  CUTLASS_DEVICE void operator()(float x0, float x1, float& y0, float& y1) const {
    times_sigmoid_pair(x0, x0, x1, x1, y0, y1);
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
// (every fp32 input checked against float64 on the H200).
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
  static constexpr bool kPairs = true;
  CUTLASS_DEVICE static float two_u(float x) {
    return 1.5957691216057307f * (x + 0.044715f * x * x * x);
  }
  CUTLASS_DEVICE float operator()(float x) const {
    return __fdividef(x, 1.0f + softmax_exp2(two_u(x) * -kLog2e));
  }
  CUTLASS_DEVICE void operator()(float x0, float x1, float& y0, float& y1) const {
    times_sigmoid_pair(x0, two_u(x0), x1, two_u(x1), y0, y1);
  }
};

template <class Fn, class = void>
struct TakesPairs : std::false_type {};
template <class Fn>
struct TakesPairs<Fn, std::void_t<decltype(Fn::kPairs)>> : std::bool_constant<Fn::kPairs> {};

// CUTLASS's epilogues take the activation as a template over the value type and apply its Array
// form to each fragment (in fp32); a functor with kPairs takes the fragment's elements in pairs.
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
      if constexpr (TakesPairs<Fn>::value) {
        static_assert(N % 2 == 0, "a fragment of column pairs");
        CUTLASS_PRAGMA_UNROLL
        for (int i = 0; i < N; i += 2) {
          float y0, y1;
          Fn{}(float(x[i]), float(x[i + 1]), y0, y1);
          y[i] = E(y0);
          y[i + 1] = E(y1);
        }
      } else {
        CUTLASS_PRAGMA_UNROLL
        for (int i = 0; i < N; ++i) y[i] = E(Fn{}(float(x[i])));
      }
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
