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

#include "oasr/common/softmax.cuh"  // softmax_exp2: 2^t on MUFU.EX2 alone (ex2.approx.ftz)

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
struct Gelu {
  CUTLASS_DEVICE float operator()(float x) const {
    return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
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
