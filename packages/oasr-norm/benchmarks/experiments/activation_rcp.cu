// Experiment (written in session 22, run in session 23 on the H200): do swish, sigmoid and
// gelu_tanh gain from an approximate reciprocal?
//
// activation_functors.cuh computes them as x * __frcp_rn(1 + __expf(-x)) (gelu_tanh with -2u).
// On sm_90 __frcp_rn is a range test, a branch around a slow-path call and a Newton step around
// MUFU.RCP (cuobjdump of a one-line kernel); __fdividef(x, d) is MUFU.RCP and a multiply. At
// 250 x 2048 (one utterance's FFN, 2 MB) the activations are latency-bound, and gelu_tanh is 0.95x
// PyTorch there (2.36 against 2.25 us in session 22's bench), so a shorter chain a value may be
// what it takes. The functors are shared with the row norms' and batch_norm's fused activations,
// so a change needs those modules' GPU tests too.
//
// Variants, each at the production launch shape for the size (the activation launcher's grain:
// two vectors a thread, one, or half): the functor with __frcp_rn (production until this probe
// ran) against the same kernel with __fdividef and with rcp.approx. First, every 16-bit input
// through each: how many outputs differ from __frcp_rn's and by how many ulps. Then graph replays and one call between events at 250 x 2048 and
// 8000 x 2048 over rotating buffers. -DDTYPE=0 half, 1 bf16; build line in README.md.
//
// Measured (session 23, graph replays / one call, fp16; bf16 alike):
//                          __frcp_rn        __fdividef       rcp.approx
//   swish     250x2048     1.93 / 4.58      1.70 / 4.13      1.72 / 4.22 us
//   gelu_tanh 250x2048     2.30 / 4.61      2.06 / 4.35      2.08 / 4.42
//   gelu_tanh 8000x2048   18.05 / 20.35    16.77 / 18.94    16.81 / 18.98
//   bits against __frcp_rn over every input: __fdividef bf16 swish 3 inputs off by up to 917
//   ulps (d > 2^126 gives 0), sigmoid 109 ulps; rcp.approx bf16 none, fp16 2 inputs of sigmoid
//   and gelu_tanh 1 ulp. rcp.approx adopted (activation_functors.cuh).
#include <cstring>
#include <string>
#include <vector>

#include "oasr/norm/activation.cuh"
#include "probe_util.cuh"

using namespace oasr;
using namespace oasr::norm;

enum class Op { kSwish, kSigmoid, kGeluTanh };
// kIeee: n * __frcp_rn(d), the functors' form before session 23 (a range test, a branch and a
// Newton step around MUFU.RCP).
// kFdividef: __fdividef(n, d) (MUFU.RCP and a multiply; 0 for d > 2^126, i.e. x in (-88.7, -87.3)
// for swish, where the true result is a normal bf16 / fp32 number).
// kApprox: n * rcp.approx.f32 without .ftz (MUFU.RCP with a scale for d > 2^126: 3 more
// instructions than __fdividef, a subnormal reciprocal kept): the library's rcp_approx since.
enum class Rcp { kIeee, kFdividef, kApprox };

template <Rcp kRcp>
OASR_DEVICE float divide(float n, float d) {
  if constexpr (kRcp == Rcp::kIeee) {
    return n * __frcp_rn(d);
  } else if constexpr (kRcp == Rcp::kFdividef) {
    return __fdividef(n, d);
  } else {
    return n * norm::rcp_approx(d);
  }
}

template <Op kOp, Rcp kRcp>
OASR_DEVICE float fast_form(float x) {
  if constexpr (kOp == Op::kSwish) {
    return divide<kRcp>(x, 1.0f + __expf(-x));
  } else if constexpr (kOp == Op::kSigmoid) {
    return divide<kRcp>(1.0f, 1.0f + __expf(-x));
  } else {
    const float u = 0.79788456080286536f * (x + 0.044715f * x * x * x);
    return divide<kRcp>(x, 1.0f + __expf(-2.0f * u));
  }
}

// The production flat kernel's shape with fast_form: kSlots vectors of N a thread.
template <Op kOp, Rcp kRcp, int N, int kSlots>
__global__ void __launch_bounds__(kActivationThreads, kActivationMinBlocks)
    fast_kernel(ActivationArgs<T> a, IndexDivmod, int64_t num_vecs) {
  chunked_steps<Vec<T, N>, kSlots>(
      num_vecs, [&](int64_t v, Vec<T, N>& slot) { slot.load(a.x + v * N); },
      [&](int64_t v, Vec<T, N>& slot) {
#pragma unroll
        for (int i = 0; i < N; ++i) slot[i] = from_float<T>(fast_form<kOp, kRcp>(to_float(slot[i])));
        slot.store(a.out + v * N);
      });
}

// The grain launch_activation picks for n elements (n a multiple of 8 here: no tail).
template <Op kOp, Rcp kRcp>
void launch_fast(const ActivationArgs<T>& a, cudaStream_t s) {
  constexpr int N = kVec128<T>;
  const int64_t n = a.rows * a.cols;
  switch (contiguous_grain(n, N, wave_threads())) {
    case Grain::kTwoVectors:
      CHECK_CUDA((launch_chunked<Vec<T, N>>(fast_kernel<kOp, kRcp, N, kStepSlots<Vec<T, N>>>, a,
                                            IndexDivmod(), n / N, s)));
      break;
    case Grain::kOneVector:
      CHECK_CUDA(
          (launch_chunked<Vec<T, N>, 1>(fast_kernel<kOp, kRcp, N, 1>, a, IndexDivmod(), n / N, s)));
      break;
    default:
      CHECK_CUDA((launch_chunked<Vec<T, N / 2>, 1>(fast_kernel<kOp, kRcp, N / 2, 1>, a, IndexDivmod(),
                                                   n / (N / 2), s)));
  }
}

template <Op kOp>
void run_op(const char* name, cudaStream_t s) {
  // Every 16-bit input: the __frcp_rn form against each fast form.
  for (const Rcp form : {Rcp::kFdividef, Rcp::kApprox}) {
    constexpr int64_t kAll = 1 << 16;
    std::vector<uint16_t> bits(kAll), prod(kAll), fast(kAll);
    for (int b = 0; b < kAll; ++b) bits[b] = uint16_t(b);
    T *dx, *dp, *df;
    CHECK_CUDA(cudaMalloc(&dx, kAll * 2));
    CHECK_CUDA(cudaMalloc(&dp, kAll * 2));
    CHECK_CUDA(cudaMalloc(&df, kAll * 2));
    CHECK_CUDA(cudaMemcpy(dx, bits.data(), kAll * 2, cudaMemcpyHostToDevice));
    launch_fast<kOp, Rcp::kIeee>(ActivationArgs<T>{dp, dx, 1, kAll, kAll}, s);
    const ActivationArgs<T> fa{df, dx, 1, kAll, kAll};
    if (form == Rcp::kFdividef) launch_fast<kOp, Rcp::kFdividef>(fa, s);
    else launch_fast<kOp, Rcp::kApprox>(fa, s);
    CHECK_CUDA(cudaMemcpy(prod.data(), dp, kAll * 2, cudaMemcpyDeviceToHost));
    CHECK_CUDA(cudaMemcpy(fast.data(), df, kAll * 2, cudaMemcpyDeviceToHost));
    auto ordered = [](uint16_t b) { return b & 0x8000 ? -int(b & 0x7fff) : int(b); };
    int differ = 0, worst = 0;
    for (int b = 0; b < kAll; ++b) {
      const float p = to_float(reinterpret_cast<const T*>(prod.data())[b]);
      if (p != p || prod[b] == fast[b]) continue;  // NaN in, NaN out either way
      ++differ;
      worst = std::max(worst, std::abs(ordered(prod[b]) - ordered(fast[b])));
    }
    printf("%s %s all 65536 inputs: %s differs from __frcp_rn on %d, worst %d ulps\n", kDtype,
           name, form == Rcp::kFdividef ? "__fdividef" : "rcp.approx", differ, worst);
    cudaFree(dx);
    cudaFree(dp);
    cudaFree(df);
  }
  for (const auto shape : {std::pair<int64_t, int64_t>{250, 2048}, {8000, 2048}}) {
    const int64_t rows = shape.first, cols = shape.second;
    RotatingSets sets(rows * cols, -4.0f);
    auto launch = [&](int k, T* y, const T* x) {
      const ActivationArgs<T> a{y, x, rows, cols, cols};
      if (k == 0) {
        launch_fast<kOp, Rcp::kIeee>(a, s);
      } else if (k == 1) {
        launch_fast<kOp, Rcp::kFdividef>(a, s);
      } else {
        launch_fast<kOp, Rcp::kApprox>(a, s);
      }
    };
    const std::string prod = std::string(name) + " __frcp_rn";
    const std::string fast = std::string(name) + " __fdividef";
    const std::string approx = std::string(name) + " rcp.approx";
    print_elementwise_times({prod.c_str(), fast.c_str(), approx.c_str()}, sets, rows, cols, s,
                            launch);
  }
}

int main() {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  cudaStream_t s;
  CHECK_CUDA(cudaStreamCreate(&s));
  run_op<Op::kSwish>("swish", s);
  run_op<Op::kSigmoid>("sigmoid", s);
  run_op<Op::kGeluTanh>("gelu_tanh", s);
  return 0;
}
