// Experiment: softmax over rows whose starts are not 16-byte aligned (250 keys of fp16: a row is
// 500 bytes, so row r starts at 4r mod 16). The production kernel reads such rows in the widest
// vector that divides the width and the stride, 4 bytes here, four loads a lane. This probe
// reads each row as an aligned body of 16-byte vectors plus a head and a tail of single values
// (at most 7 + 7, one a lane), one row per warp, and times it against the production dispatch
// (launch_softmax) and a copy of the same bytes, CUDA graphs over rotating inputs, then one call
// between events as `oasr bench` times calls over 20 us. Each variant's output is checked against
// a float64 softmax of 512 rows first. -DDTYPE=0 half, 1 bf16.
//
// Session 17 (64000 x 250 only): the body kernel 19.9 / 20.3 us (fp16 / bf16) against 22.2 as
// graph replays; half a warp per row with two body vectors a lane 40.7 us. The same kernel in the
// library (session 17, and again in session 19 with a run-time log_softmax flag) did not move
// the bench's 250 keys (24.5 us both ways) and took 500 keys (two body vectors a lane) from 21.0
// to 38.0 us and 252 keys from 19.7 to 23.7 (softmax_keys.py). Session 19 adds the shapes 500
// and 252 and two variants that ask why: the loads of all body vectors issued before the first
// max (the body kernel computes each vector's max as it arrives), and the library's run-time
// log_softmax flag. Answer (H200): the run-time flag cost the whole gain (250 keys: 22.1 against
// 19.8 us in graphs); loads first changed nothing; 252 keys are faster on 8-byte vectors (18.2
// against 19.8) and 500 keys on them (19.7 against 35.7 with two body vectors a lane). The
// library now runs the body kernel with log_softmax a template parameter for 16-bit rows of
// 65-256 that 8-byte vectors do not fit, so "production" below is that kernel from then on.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "oasr/common/softmax.cuh"
#include "probe_util.cuh"

using namespace oasr;

constexpr int kN = kVec128<T>;  // values in a 16-byte vector

// kGroup lanes per row (16 or 32; 128-thread blocks): lane j holds body vectors j, j + kGroup, ...
// (kBodyVecs at most) and one value of the head or the tail. out's rows have the same offset
// mod 16 bytes as x's. kLoadsFirst: every load before the first max. kRuntimeLog: the
// library's form, log_softmax chosen by dst.log_output at run time (false here).
template <int kGroup, int kBodyVecs, bool kLoadsFirst, bool kRuntimeLog>
__global__ void __launch_bounds__(128) probe_aligned_body_kernel(SoftmaxDst<T> dst,
                                                                 SoftmaxArgs<T> src) {
  static_assert(kGroup >= 2 * (kN - 1), "every head and tail value has a lane");
  constexpr float kNegInf = -__builtin_huge_valf();
  const int lane = threadIdx.x % kGroup;
  const int64_t row = int64_t(blockIdx.x) * (128 / kGroup) + threadIdx.x / kGroup;
  const bool row_valid = row < dst.rows;  // a warp past the last row still joins the shuffles
  const T* x = src.x + (row_valid ? row : 0) * src.x_stride;
  const int cols = int(dst.cols);
  // Values before the first 16-byte boundary, then whole vectors, then the rest.
  const int misalign = int(reinterpret_cast<uintptr_t>(x) % 16) / int(sizeof(T));
  const int head = min(misalign ? kN - misalign : 0, cols);
  const int body = (cols - head) / kN;
  const int tail = cols - head - body * kN;
  const T* x_body = x + head;
  const bool log_output = kRuntimeLog && dst.log_output;

  float values[kBodyVecs][kN];
  float edge = kNegInf;  // lane < head: head value `lane`; head <= lane < head + tail: tail value
  const int edge_col = lane < head ? lane : head + body * kN + (lane - head);
  const bool has_edge = row_valid && lane < head + tail;
  if (has_edge) edge = to_float(x[edge_col]);
  float thread_max = edge;
  auto load = [&](int j) {
    const int v = j * kGroup + lane;
    if (row_valid && v < body) {
      Vec<T, kN> vec;
      vec.load(x_body + v * kN);
      vec.to_float(values[j]);
    } else {
#pragma unroll
      for (int i = 0; i < kN; ++i) values[j][i] = kNegInf;
    }
  };
  if constexpr (kLoadsFirst) {
#pragma unroll
    for (int j = 0; j < kBodyVecs; ++j) load(j);
  }
#pragma unroll
  for (int j = 0; j < kBodyVecs; ++j) {
    if constexpr (!kLoadsFirst) load(j);
#pragma unroll
    for (int i = 0; i < kN; ++i) thread_max = fmaxf(thread_max, values[j][i]);
  }
  const float row_max = warp_reduce<MaxOp, kGroup>(thread_max);
  auto exp_of = [&](float v) { return exp2f((v - row_max) * kLog2e); };
  float thread_sum = has_edge ? exp_of(edge) : 0.0f;
  if (!log_output) edge = exp_of(edge);
#pragma unroll
  for (int j = 0; j < kBodyVecs; ++j) {
#pragma unroll
    for (int i = 0; i < kN; ++i) {
      const float e = exp_of(values[j][i]);
      thread_sum += e;
      if (!log_output) values[j][i] = e;
    }
  }
  const float row_sum = warp_reduce<SumOp, kGroup>(thread_sum);
  if (!row_valid) return;
  const float inv_sum = __fdividef(1.0f, row_sum);
  const float log_sum = log_output ? logf(row_sum) : 0.0f;
  auto finish = [&](float v) { return log_output ? (v - row_max) - log_sum : v * inv_sum; };
  T* out = dst.out + row * dst.cols;
  if (has_edge) out[edge_col] = from_float<T>(finish(edge));
#pragma unroll
  for (int j = 0; j < kBodyVecs; ++j) {
    const int v = j * kGroup + lane;
    if (v < body) {
#pragma unroll
      for (int i = 0; i < kN; ++i) values[j][i] = finish(values[j][i]);
      store_values<T, kN>(out + head + v * kN, values[j]);
    }
  }
}

constexpr int kVariants = 5;
const char* kNames[kVariants] = {"production", "aligned body", "body, loads 1st",
                                 "body, run-time log", "copy"};

// body vectors a lane: 1 up to 32 of them (256 halves), else 2 (512)
template <int kBodyVecs>
void run_shape(int64_t rows, int64_t cols, cudaStream_t s) {
  const int64_t n = rows * cols;
  RotatingSets buffers(n, -4.0f);
  const size_t bytes = buffers.bytes;
  const dim3 grid(unsigned((rows + 3) / 4));
  auto launch = [&](int k, T* y, T* x) {
    SoftmaxDst<T> d{y, rows, cols, false};
    SoftmaxArgs<T> a{y, x, rows, cols, cols, false};
    if (k == 0) {
      CHECK_CUDA(launch_softmax<T>(a, s));  // the library's choice
    } else if (k == 1) {
      probe_aligned_body_kernel<32, kBodyVecs, false, false><<<grid, 128, 0, s>>>(d, a);
    } else if (k == 2) {
      probe_aligned_body_kernel<32, kBodyVecs, true, false><<<grid, 128, 0, s>>>(d, a);
    } else if (k == 3) {
      probe_aligned_body_kernel<32, kBodyVecs, false, true><<<grid, 128, 0, s>>>(d, a);
    } else {
      CHECK_CUDA(cudaMemcpyAsync(y, x, bytes, cudaMemcpyDeviceToDevice, s));
    }
  };

  for (int k = 0; k + 1 < kVariants; ++k) {  // each kernel against float64
    const double worst = softmax_worst_error(k, buffers, rows, cols, s, launch);
    printf("%s %lldx%lld %-18s check: worst |err| / (1e-3 + ref) = %.3g%s\n", kDtype,
           (long long)rows, (long long)cols, kNames[k], worst, worst < 2e-2 ? "" : "  FAILED");
  }

  const std::vector<float> graph = graph_medians_us(kVariants, buffers, s, launch);
  // As `oasr bench` times calls over 20 us: events around one call, queued behind a 1 ms spin,
  // the inputs rotating and one output buffer for every call (the caching allocator hands an
  // eager op the block its previous output freed).
  const std::vector<float> single = one_call_medians_us(kVariants, buffers, s, launch);
  for (int k = 0; k < kVariants; ++k) {
    const float g = graph[k];
    printf("%s %lldx%lld %-18s graph %7.2f us (%.2fx production's time, %4.1f%% of 4.26 TB/s), "
           "one call %7.2f us\n",
           kDtype, (long long)rows, (long long)cols, kNames[k], g, g / graph[0],
           100 * 2.0 * bytes / (g * 1e-6) / 4.26e12, single[k]);
  }
}

int main() {
  cudaStream_t s;
  CHECK_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  run_shape<1>(64000, 250, s);
  run_shape<1>(63492, 252, s);
  run_shape<2>(32000, 500, s);
  return 0;
}
