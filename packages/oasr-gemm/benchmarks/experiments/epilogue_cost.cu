// Experiment: what each part of the sm90 GEMM's epilogue costs at ASR shapes.
//
// Sessions 4-6 shipped one kernel per config with LinCombPerColBiasEltAct and a run-time
// activation switch (RuntimeActivation below), also for a plain GEMM; session 7 compiles the
// activation in, on this probe's evidence. One tile structure per executable (-DSTRUCT=n),
// timed with up to twenty-two epilogues on random fp16 data (-DKIND_MASK picks some):
//   0 plain LinearCombination                     6 bias + Swish: ex2.approx, Newton reciprocal
//   1 bias + Identity compiled in                 7 bias + exact GELU, erff (the package's
//                                                   through session 26; a copy below since then)
//   2 run-time switch: identity, no bias          8 bias + exact GELU through erfc (session 8)
//   3 run-time switch: swish, bias                9 bias + tanh GELU (the package's)
//   4 bias + Swish compiled in (the package's)   10 bias + Swish on ex2 / rcp.approx.ftz alone
//     (session 24: the same SASS as 10; kind 4 was __expf's form before)
//   5 bias + Swish as x/2 (1 + tanh.approx(x/2))  11-13 as 10, with 2, 4 or 6 of every 8
//                                                    reciprocals by Newton (session 24)
//  14, 15 bias + Swish with one reciprocal for two columns: the clamp form (the package's since
//        session 30) and the abs form (exact past x = -43.7, one instruction more an element)
//  16-19 act(acc + bias) with no alpha, beta or C (the package's kernels without C since session
//        30): identity, Swish (one reciprocal an element), the two pair forms
//  20, 21 as 16 and 18 with no C in shared memory either (ElementC void; the package's)
// -DSTRUCT=0 cooperative 256x128, 1 ping-pong 128x128 with a 2x1 cluster, 2 ping-pong 128x128,
// 3 cooperative 128x256, 4 ping-pong 64x256, 5 ping-pong 64x256 with a 2x1 cluster.
// Session 18 ran 7 against 8 (H200, fp16): the erfc form is no faster in the epilogue. Ping-pong
// 128x128: 1286 -> 1261 us at 48000x5120x1280 (1283 -> 1221 with the 2x1 cluster), but 59.5 ->
// 63.7 us at 8000x2048x256 and 143 -> 155 us at 8000x5000x256; and with it in the package,
// `oasr bench gemm` timed GELU at 48000x5120x1280 at 1098 / 1071 us (fp16 / bf16) against 1105 /
// 1046 before. The package keeps erff.
// Session 24 ran kinds 1, 4, 10-13 (kind 4 then __expf's form) on structures 0, 2 and 3, two
// rounds each (H200, us, round 1): at 8000x2048x256 bias + identity 24.1 / 24.9 / 24.3, Swish
// 32.1 / 36.0 / 32.1, trimmed (10) 31.4 / 33.6 / 31.3, with 2 of 8 reciprocals by Newton (11)
// 30.6 / 33.2 / 30.8; at 32000x2048x512 Swish 155.7 / 139.2 / 158.5, trimmed 161.6 / 135.7 /
// 154.9 (round 2: 148.7 / 136.3 / 164.2: this shape moves by 5-8% between runs), Newton 2 of 8
// 157.7 / 153.2 / 153.6 (ping-pong: 10-18% slower in both rounds, 4 and 6 of 8 likewise). The
// package took form 10 (the same SASS, same bits as before); the Newton split was not kept.
// Session 28 ran kinds 1 and 4 on structures 2-5, two rounds (H200, us, round 1): at
// 8000x2048x256 bias + identity 24.96 / 24.39 / 25.02 / 26.25, Swish 33.53 / 31.14 / 32.86 /
// 33.92 (structures 2, 3, 4, 5): ping-pong 64x256, alone or with B multicast to a 2x1 cluster,
// does not hide Swish under the other warpgroup's MMAs any better than 128x128 does; not taken.
// Session 30 ran kinds 1, 4, 14-19 and then 1, 4, 14, 16-18, 20, 21 on structures 3 and 2, two
// rounds each (H200, us, 8000x2048x256, cooperative 128x256 / ping-pong 128x128): bias +
// identity 24.2-24.6 / 24.7-25.1, without C 22.3-22.6 / 21.5-22.0; Swish 31.1-31.4 / 33.1-33.9,
// paired 30.0-30.5 / 32.8-33.6, without C 29.3-29.6 / 29.1-29.5, without C and paired 27.7-28.0 /
// 28.4-29.0 (abs form 28.4-28.6 / 29.6; ElementC void 27.9-28.0 / 28.6-28.7); 8000x5000x256
// Swish 73.1-73.8 -> 65.2-66.2 paired without C (cooperative); 32000x1536x512 126-131 / 133-136
// -> 114-119 / 110-115. 32000x2048x512 and 48000x5120x1280 moved by 5-20% with a kind's place in
// the run (power: the timing runs the kinds back to back), so `oasr bench` (alternating
// processes) measured the package: gemm_activation 1.28-1.29x -> 1.34-1.35x (docs/perf/h200.md).
// The five Swish forms are also evaluated alone on 2^22 points of [-30, 30] against float64:
// the worst error in units of the fp16 spacing at the exact value (what rounding to fp16 sees).
// Build: see README.md.
#include <cmath>
#include <cstdio>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <cuda_fp16.h>
#include <cute/tensor.hpp>
#include <cutlass/cutlass.h>
#include <cutlass/epilogue/collective/collective_builder.hpp>
#include <cutlass/epilogue/thread/activation.h>
#include <cutlass/gemm/collective/collective_builder.hpp>
#include <cutlass/gemm/device/gemm_universal_adapter.h>
#include <cutlass/gemm/kernel/gemm_universal.hpp>

#include "fill_random.cuh"
#include "oasr/gemm/gemm_activation.cuh"

using T = cutlass::half_t;
using cute::Int;

// The run-time activation switch of sessions 4-6: CUTLASS passes a functor's `Arguments` to it;
// the switch runs once per fragment.
struct ActivationArgs {
  int kind = 0;  // 0 identity, 1 relu, 2 swish, 3 gelu, 4 gelu_tanh
};
template <class V>
struct RuntimeActivation {
  using Arguments = ActivationArgs;
};
template <class E, int N>
struct RuntimeActivation<cutlass::Array<E, N>> {
  using Arguments = ActivationArgs;
  using Fragment = cutlass::Array<E, N>;
  template <class Fn>
  CUTLASS_DEVICE static Fragment apply(Fragment const& x, Fn fn) {
    Fragment y;
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < N; ++i) y[i] = E(fn(float(x[i])));
    return y;
  }
  CUTLASS_DEVICE Fragment operator()(Fragment const& x, Arguments const& args) const {
    switch (args.kind) {
      case 1: return apply(x, oasr::gemm::Relu{});
      case 2: return apply(x, oasr::gemm::Swish{});
      case 3: return apply(x, oasr::gemm::Gelu{});
      case 4: return apply(x, oasr::gemm::GeluTanh{});
      default: return x;
    }
  }
};

// 1/d for d >= 1 on the FMA pipe (session 24): the bit-trick guess (5% off) and two Newton
// steps (6.6e-6 relative, about a hundredth of an fp16 ulp), d clamped to 2^126 so that the
// guess stays normal. 6 FMA-pipe instructions where MUFU.RCP is one issue slot and 8 of the
// SFU's cycles a warp (it serves 4 lanes a cycle per scheduler).
__device__ __forceinline__ float rcp_newton(float d) {
  d = fminf(d, 8.5070592e37f);
  float r = __int_as_float(0x7EF311C7 - __float_as_int(d));
  r = fmaf(r, fmaf(-d, r, 1.0f), r);
  return fmaf(r, fmaf(-d, r, 1.0f), r);
}
__device__ __forceinline__ float ex2_ftz(float t) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(t));
  return y;
}
__device__ __forceinline__ float rcp_ftz(float d) {
  float y;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(d));
  return y;
}

// Swish compiled in: five forms of x * sigmoid(x).
template <int kForm>
struct SwishForm {
  CUTLASS_DEVICE static float apply(float x) {
    if constexpr (kForm == 0) {  // the package's before session 24: two MUFU ops (ex2, rcp)
      return __fdividef(x, 1.0f + __expf(-x));
    } else if constexpr (kForm == 1) {  // one MUFU op: sigmoid(x) = 0.5 + 0.5 tanh(x / 2)
      const float h = 0.5f * x;
      float t;
      asm("tanh.approx.f32 %0, %1;" : "=f"(t) : "f"(h));
      return fmaf(h, t, h);
    } else if constexpr (kForm == 3) {  // two MUFU ops, no range fix-ups: e = inf gives -0
      return x * rcp_ftz(1.0f + ex2_ftz(x * -1.4426950408889634f));
    } else if constexpr (kForm == 4) {  // one MUFU op (ex2), the reciprocal by Newton
      return x * rcp_newton(1.0f + ex2_ftz(x * -1.4426950408889634f));
    } else {  // one MUFU op: ex2, then 1 / (1 + e) by Newton from a bit-trick guess
      const float e = exp2f(fminf(-x, 80.0f) * 1.4426950408889634f);  // ex2.approx.ftz
      const float d = 1.0f + e;
      float r = __int_as_float(0x7EF311C7 - __float_as_int(d));
      r = r * (2.0f - d * r);
      r = r * (2.0f - d * r);
      r = r * (2.0f - d * r);
      return x * r;
    }
  }
};
template <int kForm>
struct SwishFn {
  template <class V>
  struct Op {
    CUTLASS_DEVICE V operator()(V const& x) const { return V(SwishForm<kForm>::apply(float(x))); }
  };
  template <class E, int N>
  struct Op<cutlass::Array<E, N>> {
    CUTLASS_DEVICE cutlass::Array<E, N> operator()(cutlass::Array<E, N> const& x) const {
      cutlass::Array<E, N> y;
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < N; ++i) y[i] = E(SwishForm<kForm>::apply(float(x[i])));
      return y;
    }
  };
};
template <class V>
using Swish1 = SwishFn<1>::Op<V>;
template <class V>
using Swish2 = SwishFn<2>::Op<V>;

// Exact GELU as x * erfc(-x / sqrt 2) / 2 with a branch-free Chebyshev erfc: the form of
// packages/oasr-norm/benchmarks/experiments/gelu_erfc.cu (which checks its accuracy: for fp16 /
// bf16 outputs it is closer to float64 GELU than erff's form).
struct GeluErfc {
  CUTLASS_DEVICE float operator()(float x) const {
    const float z = fabsf(x) * 0.70710678118654752f;
    const float t = __fdividef(1.0f, fmaf(0.5f, z, 1.0f));
    float p = 0.17087277f;
    p = fmaf(p, t, -0.82215223f);
    p = fmaf(p, t, 1.48851587f);
    p = fmaf(p, t, -1.13520398f);
    p = fmaf(p, t, 0.27886807f);
    p = fmaf(p, t, -0.18628806f);
    p = fmaf(p, t, 0.09678418f);
    p = fmaf(p, t, 0.37409196f);
    p = fmaf(p, t, 1.00002368f);
    p = fmaf(p, t, -1.26551223f);
    const float half_erfc = 0.5f * t * __expf(fmaf(-z, z, p));
    return x * (x >= 0.0f ? 1.0f - half_erfc : half_erfc);
  }
};
// The package's exact GELU through session 26 (since 27 it is the normal-tail form of
// gemm_activation.cuh: gelu_epilogue_accuracy.cu and docs/gemm.md, "Activations").
struct GeluErffForm {
  CUTLASS_DEVICE float operator()(float x) const {
    return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
  }
};
template <class V>
using GeluErff = oasr::gemm::Elementwise<GeluErffForm>::Op<V>;
template <class V>
using GeluErfcAct = oasr::gemm::Elementwise<GeluErfc>::Op<V>;

// Swish with the reciprocals of kNewton of every 8 fragment elements on the FMA pipe (form 4),
// the others on the SFU (form 3): the epilogue at K 256 is bound by the SFU (two MUFU ops an
// element), so moving part of them to the FMA pipe trades SFU cycles for issue slots.
template <int kNewton>
struct SwishSplit {
  template <class V>
  struct Op {  // (CUTLASS applies the Array form)
    CUTLASS_DEVICE V operator()(V const& x) const { return V(SwishForm<3>::apply(float(x))); }
  };
  template <class E, int N>
  struct Op<cutlass::Array<E, N>> {
    CUTLASS_DEVICE cutlass::Array<E, N> operator()(cutlass::Array<E, N> const& x) const {
      cutlass::Array<E, N> y;
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < N; ++i) {
        const float v = float(x[i]);
        y[i] = E(i % 8 < kNewton ? SwishForm<4>::apply(v) : SwishForm<3>::apply(v));
      }
      return y;
    }
  };
};
template <class V>
using SwishTrim = SwishSplit<0>::Op<V>;
template <class V>
using SwishNewton2 = SwishSplit<2>::Op<V>;
template <class V>
using SwishNewton4 = SwishSplit<4>::Op<V>;
template <class V>
using SwishNewton6 = SwishSplit<6>::Op<V>;
template <class V>
using GeluTanhAct = oasr::gemm::GeluTanhAct<V>;

// Session 30: Swish with one reciprocal for two elements. CUTLASS visits fragments whose element
// pairs (2i, 2i + 1) are adjacent columns of one row (wgmma's accumulator pairs; the sm80 lane's
// 8-column vectors), so rows stay independent: 1/d0 = d1 / (d0 d1), 1.5 MUFU ops an element.
// Clamp form: e = 2^min(-x log2e, 63) keeps d0 d1 below 2^127 and a NaN's d finite (it does not
// reach its partner); below x = -43.7 the output is x 2^-63 (|y| < 1e-17) instead of x e^x.
// Abs form: e = 2^-|x| log2e in (0, 1], d in [1, 2], numerator max(x, x e) (x >= 0: x; x < 0:
// x e), exact to where ex2 flushes (x < -87.3); one FMA-pipe instruction more an element.
template <bool kAbs>
CUTLASS_DEVICE void swish_pair(float x0, float x1, float& y0, float& y1) {
  constexpr float c = -1.4426950408889634f;
  if constexpr (kAbs) {
    const float e0 = ex2_ftz(fmaxf(fabsf(x0) * c, -127.0f));
    const float e1 = ex2_ftz(fmaxf(fabsf(x1) * c, -127.0f));
    const float d0 = 1.0f + e0, d1 = 1.0f + e1;
    const float r = rcp_ftz(d0 * d1);
    y0 = fmaxf(x0, x0 * e0) * (r * d1);
    y1 = fmaxf(x1, x1 * e1) * (r * d0);
  } else {
    const float d0 = 1.0f + ex2_ftz(fminf(x0 * c, 63.0f));
    const float d1 = 1.0f + ex2_ftz(fminf(x1 * c, 63.0f));
    const float r = rcp_ftz(d0 * d1);
    y0 = x0 * (r * d1);
    y1 = x1 * (r * d0);
  }
}
template <bool kAbs>
struct SwishPairFn {
  template <class V>
  struct Op {  // (CUTLASS applies the Array form)
    CUTLASS_DEVICE V operator()(V const& x) const { return V(SwishForm<3>::apply(float(x))); }
  };
  template <class E, int N>
  struct Op<cutlass::Array<E, N>> {
    static_assert(N % 2 == 0, "pairs of columns");
    CUTLASS_DEVICE cutlass::Array<E, N> operator()(cutlass::Array<E, N> const& x) const {
      cutlass::Array<E, N> y;
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < N; i += 2) {
        float y0, y1;
        swish_pair<kAbs>(float(x[i]), float(x[i + 1]), y0, y1);
        y[i] = E(y0);
        y[i + 1] = E(y1);
      }
      return y;
    }
  };
};
template <class V>
using SwishPairClamp = SwishPairFn<false>::Op<V>;
template <class V>
using SwishPairAbs = SwishPairFn<true>::Op<V>;

// act(acc + bias): no alpha, beta or C (LinCombPerColBiasEltAct converts and adds beta * C even
// without a C: two FMA-pipe instructions an element)
namespace fu = cutlass::epilogue::fusion;
template <template <class> class Act, class TileShape>
using BiasActNoC = fu::Sm90EVT<
    fu::Sm90Compute<Act, T, float, cutlass::FloatRoundStyle::round_to_nearest>,
    fu::Sm90EVT<
        fu::Sm90Compute<cutlass::plus, float, float, cutlass::FloatRoundStyle::round_to_nearest>,
        fu::Sm90AccFetch,
        fu::Sm90RowBroadcast<0, TileShape, T, float, cute::Stride<cute::_0, cute::_1, int64_t>>>>;

template <int kKind, class TileShape>
struct FusionOf {
  template <template <class> class Act>
  using BiasAct = cutlass::epilogue::fusion::LinCombPerColBiasEltAct<Act, T, float, T, T, float>;
  template <template <class> class Act>
  using NoC = BiasActNoC<Act, TileShape>;
  // kinds 0-19, as the header lists them
  using type = std::tuple_element_t<
      kKind,
      std::tuple<cutlass::epilogue::fusion::LinearCombination<T, float, T, float>,
                 BiasAct<cutlass::epilogue::thread::Identity>, BiasAct<RuntimeActivation>,
                 BiasAct<RuntimeActivation>, BiasAct<oasr::gemm::SwishAct>, BiasAct<Swish1>,
                 BiasAct<Swish2>, BiasAct<GeluErff>, BiasAct<GeluErfcAct>, BiasAct<GeluTanhAct>,
                 BiasAct<SwishTrim>, BiasAct<SwishNewton2>, BiasAct<SwishNewton4>,
                 BiasAct<SwishNewton6>, BiasAct<SwishPairClamp>, BiasAct<SwishPairAbs>,
                 NoC<cutlass::epilogue::thread::Identity>, NoC<oasr::gemm::SwishAct>,
                 NoC<SwishPairClamp>, NoC<SwishPairAbs>, NoC<cutlass::epilogue::thread::Identity>,
                 NoC<SwishPairClamp>>>;
};

template <int TM, int TN, int CM, bool kCoop, int kKind>
struct Variant {
  using TileShape = cute::Shape<Int<TM>, Int<TN>, Int<64>>;
  using ClusterShape = cute::Shape<Int<CM>, cute::_1, cute::_1>;
  using KernelSchedule = std::conditional_t<kCoop, cutlass::gemm::KernelTmaWarpSpecializedCooperative,
                                            cutlass::gemm::KernelTmaWarpSpecializedPingpong>;
  using EpiSchedule = std::conditional_t<kCoop, cutlass::epilogue::TmaWarpSpecializedCooperative,
                                         cutlass::epilogue::TmaWarpSpecialized>;
  using ElementC = std::conditional_t<(kKind >= 20), void, T>;  // kinds 20, 21: no C in smem
  using Epi = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float, ElementC,
      cutlass::layout::RowMajor, 8, T, cutlass::layout::RowMajor, 8, EpiSchedule,
      typename FusionOf<kKind, TileShape>::type>::CollectiveOp;
  using Main = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, T, cutlass::layout::RowMajor, 8, T,
      cutlass::layout::ColumnMajor, 8, float, TileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
          sizeof(typename Epi::SharedStorage))>,
      KernelSchedule>::CollectiveOp;
  using Kernel = cutlass::gemm::kernel::GemmUniversal<cute::Shape<int, int, int, int>, Main, Epi>;
  using Adapter = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;

  // best of 5 means of 20 back-to-back launches, in microseconds; < 0: could not run
  static float time(int m, int n, int k, const T* a, const T* b, const T* bias, T* d, int sms) {
    typename Kernel::StrideA sa{int64_t(k), Int<1>{}, int64_t(0)};
    typename Kernel::StrideB sb{int64_t(k), Int<1>{}, int64_t(0)};
    typename Kernel::StrideC sc{int64_t(n), Int<1>{}, int64_t(0)};
    typename Kernel::StrideD sd{int64_t(n), Int<1>{}, int64_t(0)};
    typename Adapter::Arguments args{cutlass::gemm::GemmUniversalMode::kGemm, {m, n, k, 1},
                                     {a, sa, b, sb}, {{}, d, sc, d, sd}};
    args.hw_info.device_id = 0;
    args.hw_info.sm_count = sms;
    if constexpr (kKind >= 16) {  // act(acc + bias): {{acc, bias, plus}, act}
      args.epilogue.thread = {{{}, {bias, T(0), {}}, {}}, {}};
    } else {
      args.epilogue.thread.alpha = 1.f;
      args.epilogue.thread.beta = 0.f;
    }
    if constexpr (kKind != 0 && kKind < 16) {
      args.epilogue.thread.bias_ptr = kKind == 2 ? nullptr : bias;
    }
    if constexpr (kKind == 2 || kKind == 3) {
      args.epilogue.thread.activation.kind = kKind == 2 ? 0 : 2;  // identity / swish
    }
    Adapter g;
    if (g.can_implement(args) != cutlass::Status::kSuccess) return -1;
    if (g.initialize(args, nullptr, 0) != cutlass::Status::kSuccess) return -2;
    for (int i = 0; i < 5; ++i) g.run(0);
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    float best = 1e9f;
    for (int rep = 0; rep < 5; ++rep) {
      cudaEventRecord(e0);
      for (int i = 0; i < 20; ++i) g.run(0);
      cudaEventRecord(e1);
      cudaEventSynchronize(e1);
      float ms;
      cudaEventElapsedTime(&ms, e0, e1);
      best = fminf(best, ms * 1000.f / 20);
    }
    if (cudaGetLastError() != cudaSuccess) return -3;
    return best;
  }
};

#ifndef STRUCT
#define STRUCT 0
#endif
#if STRUCT == 0
template <int kKind>
using V = Variant<256, 128, 1, true, kKind>;
#define NAME "coop 256x128x64 c1x1"
#elif STRUCT == 1
template <int kKind>
using V = Variant<128, 128, 2, false, kKind>;
#define NAME "pp 128x128x64 c2x1"
#elif STRUCT == 2  // what the shipped tuning data runs gemm_activation on from 32000 rows
template <int kKind>
using V = Variant<128, 128, 1, false, kKind>;
#define NAME "pp 128x128x64 c1x1"
#elif STRUCT == 3  // what it runs linear + Swish on at 8000 x 2048 x 256
template <int kKind>
using V = Variant<128, 256, 1, true, kKind>;
#define NAME "coop 128x256x64 c1x1"
#elif STRUCT == 4  // session 28: a consumer warpgroup's epilogue under the other's 64 x 256 MMAs
template <int kKind>
using V = Variant<64, 256, 1, false, kKind>;
#define NAME "pp 64x256x64 c1x1"
#else  // session 28: the same with B's box multicast to a 2 x 1 cluster (A and B bytes as STRUCT 3)
template <int kKind>
using V = Variant<64, 256, 2, false, kKind>;
#define NAME "pp 64x256x64 c2x1"
#endif

template <int kForm>
__global__ void eval_swish(float* y, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float x = -30.0f + 60.0f * float(i) / float(n);
  if constexpr (kForm >= 5) {  // the pair forms (5 clamp, 6 abs), partnered with -x / 3 + 1
    float partner;
    swish_pair<kForm == 6>(x, 1.0f - x / 3.0f, y[i], partner);
  } else {
    y[i] = SwishForm<kForm>::apply(x);
  }
}

// worst |y - silu(x)| / (fp16 spacing at silu(x)) over the grid of eval_swish
template <int kForm>
static double swish_error_ulp16() {
  const int n = 1 << 22;
  float* dy;
  cudaMalloc(&dy, n * sizeof(float));
  eval_swish<kForm><<<n / 256, 256>>>(dy, n);
  std::vector<float> y(n);
  cudaMemcpy(y.data(), dy, n * sizeof(float), cudaMemcpyDeviceToHost);
  cudaFree(dy);
  double worst = 0;
  for (int i = 0; i < n; ++i) {
    const double x = double(-30.0f + 60.0f * float(i) / float(n));
    const double ref = x / (1.0 + std::exp(-x));
    int e;
    std::frexp(std::fmax(std::fabs(ref), 6.1e-5), &e);  // fp16: 10 fraction bits, min normal 2^-14
    worst = std::fmax(worst, std::fabs(double(y[i]) - ref) / std::ldexp(1.0, e - 11));
  }
  return worst;
}

// The epilogues timed: bit k of KIND_MASK times kind k (each kind is a kernel to compile, so a
// subset builds faster: -DKIND_MASK=0x1C12 is kinds 1, 4, 10, 11 and 12; nvcc splits -D values at
// commas, hence a mask).
#ifndef KIND_MASK
#define KIND_MASK 0x3FFFFF
#endif
constexpr int kNumKinds = __builtin_popcount(KIND_MASK & 0x3FFFFF);
struct KindArray {
  int k[kNumKinds];
};
constexpr KindArray kind_array() {
  KindArray a{};
  for (int bit = 0, i = 0; bit < 22; ++bit) {
    if ((KIND_MASK >> bit) & 1) a.k[i++] = bit;
  }
  return a;
}
constexpr KindArray kKinds = kind_array();
const char* const kKindNames[] = {"plain",    "b+id",      "rt id",     "rt swish",
                                  "swish",    "tanh",      "ex2+nr",    "gelu erf",
                                  "gelu erfc", "gelu tanh", "sw trim",  "sw nt 2/8",
                                  "sw nt 4/8", "sw nt 6/8", "sw pair",  "sw pr abs",
                                  "noC id",   "noC sw",    "noC pair", "noC pr ab",
                                  "void id",  "void pair"};

template <int... kIndex>
void time_kinds(std::integer_sequence<int, kIndex...>, int m, int n, int k, const T* a,
                const T* b, const T* bias, T* d, int sms, float* t) {
  ((t[kIndex] = V<kKinds.k[kIndex]>::time(m, n, k, a, b, bias, d, sms)), ...);
}

template <int... kIndex>
void print_stages(std::integer_sequence<int, kIndex...>) {
  ((printf(" %4d/%4d", int(V<kKinds.k[kIndex]>::Main::DispatchPolicy::Stages),
           int(sizeof(typename V<kKinds.k[kIndex]>::Kernel::SharedStorage) / 1024))),
   ...);
}

int main() {
  int sms;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  const size_t cap = size_t(48000) * 5120;
  T *a, *b, *bias, *d;
  cudaMalloc(&a, cap * 2);
  cudaMalloc(&b, cap * 2);
  cudaMalloc(&bias, 8192 * 2);
  cudaMalloc(&d, cap * 2);
  // A, B uniform in +-1 scaled so z = A . B has a spread of a few units at any K
  const int shapes[][3] = {{8000, 2048, 256}, {8000, 256, 256},   {8000, 5000, 256},
                           {32000, 2048, 512}, {32000, 1536, 512}, {8000, 512, 2048},
                           {48000, 5120, 1280}};
  printf("%s. Swish forms' worst error in fp16 ulps on [-30, 30]: __expf %.3f, tanh %.3f, "
         "ex2+newton %.3f, ex2/rcp.ftz %.3f, ex2.ftz + 2 Newton steps %.3f, pairs: clamp %.3f, "
         "abs %.3f\n",
         NAME, swish_error_ulp16<0>(), swish_error_ulp16<1>(), swish_error_ulp16<2>(),
         swish_error_ulp16<3>(), swish_error_ulp16<4>(), swish_error_ulp16<5>(),
         swish_error_ulp16<6>());
  printf("%-18s", "M x N x K");
  for (int kind : kKinds.k) printf(" %9s", kKindNames[kind]);
  printf("  (us)\n%-18s", "stages/smem KiB");
  print_stages(std::make_integer_sequence<int, kNumKinds>{});
  printf("\n");
  for (auto& s : shapes) {
    const int m = s[0], n = s[1], k = s[2];
    const float scale = 2.0f / std::sqrt(float(k)) * 1.7f;
    fill_random<<<1024, 256>>>(a, size_t(m) * k, 1234u + k, 1.0f);
    fill_random<<<1024, 256>>>(b, size_t(n) * k, 99u + n, scale);
    fill_random<<<64, 256>>>(bias, 8192, 7u, 1.0f);
    float t[kNumKinds];
    time_kinds(std::make_integer_sequence<int, kNumKinds>{}, m, n, k, a, b, bias, d, sms, t);
    char shape[32];
    snprintf(shape, sizeof shape, "%dx%dx%d", m, n, k);
    printf("%-18s", shape);
    for (float x : t) printf(" %9.2f", x);
    printf("\n");
  }
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
