// Experiment (session 21): does softmax over 250 keys (74.6% of copy fp16, 70.6% bf16 in the
// bench) gain from warps that stay resident and walk rows, loading the next row before reducing
// the current one?
//
// The library's softmax_aligned_body_kernel gives each warp one row (a 16-byte body vector and
// one head/tail value a lane) and exits: 64000 rows are 16000 blocks of four warps, ~7.6 waves
// of block launches at 16 blocks an SM, and each warp waits for its loads with nothing else to
// do. Here the grid is what fits on the GPU at once; warp w takes rows w, w + W, w + 2W, ...
// and (kPrefetch) issues the loads of its next row before the reductions of the current one,
// so every warp keeps one row's loads in flight while it computes.
//
// H200 (session 21), us as graph replays / one call between events, fp16 (bf16 within 2%):
//                    library        persistent     persistent+prefetch   cudaMemcpy D2D
//   64000 x 250   18.30 / 21.15   19.12 / 21.41     22.04 / 24.74       25.02 / 21.82
//   8000 x 250     4.11 /  6.14    4.12 /  5.89      4.71 /  6.18        4.72 /  8.35
//   64000 x 249   18.70 / 21.18   19.55 / 21.38     22.49 / 24.83       25.34 / 21.34
// Not adopted: resident warps are no faster, and the prefetch (its registers cost a quarter of
// the blocks an SM: 1584 against 2112) is slower. The library's one call at 64000 x 250 is
// already quicker than cudaMemcpyAsync of the same bytes (21.15 against 21.82 us); as
// graph replays it moves 82% of 4.27 TB/s. What keeps the bench's one-call figure at 74.6% of
// the large-copy ceiling is the fixed cost of one launch between events (~3 us of 20), not the
// kernel. bf16 and fp16 are within 1% here, where the bench reports bf16 6% slower.
//
// Variants: the library (launch_softmax), persistent without and with the prefetch, and a copy
// of the same bytes. Each kernel is checked against a float64 softmax of 512 rows, then timed as
// graph replays over rotating inputs and as one call between events (as `oasr bench` times
// calls over 20 us). -DDTYPE=0 half, 1 bf16; the build line is in README.md.
#include <algorithm>
#include <cstdio>
#include <vector>

#include "oasr/common/softmax.cuh"
#include "probe_util.cuh"

using namespace oasr;

constexpr int kN = kVec128<T>;  // values in a 16-byte vector
constexpr int kWarps = kSoftmaxWarpBlockThreads / kWarpSize;

// One row's loads, as the aligned body kernel makes them: lane < body holds body vector `lane`,
// lane < head + tail one value of the head or the tail (rows of at most 32 vectors).
struct RowLoads {
  Vec<T, kN> body;
  T edge;
  int head, bodies, tail, edge_col;
  bool has_body, has_edge;

  OASR_DEVICE void issue(const SoftmaxArgs<T>& src, int64_t row, int lane) {
    const T* x = src.x + row * src.x_stride;
    const int cols = static_cast<int>(src.cols);
    const int misalign = static_cast<int>(reinterpret_cast<uintptr_t>(x) % 16 / sizeof(T));
    head = min(misalign ? kN - misalign : 0, cols);
    bodies = (cols - head) / kN;
    tail = cols - head - bodies * kN;
    edge_col = lane < head ? lane : head + bodies * kN + (lane - head);
    has_edge = lane < head + tail;
    has_body = lane < bodies;
    if (has_edge) edge = x[edge_col];
    if (has_body) body.load(x + head + lane * kN);
  }
};

template <bool kPrefetch>
__global__ void __launch_bounds__(kSoftmaxWarpBlockThreads)
    persistent_body_kernel(SoftmaxDst<T> dst, SoftmaxArgs<T> src) {
  constexpr float kNegInf = -__builtin_huge_valf();
  const int lane = threadIdx.x % kWarpSize;
  const int64_t stride = int64_t(gridDim.x) * kWarps;
  int64_t row = int64_t(blockIdx.x) * kWarps + threadIdx.x / kWarpSize;
  RowLoads next;
  if (kPrefetch && row < dst.rows) next.issue(src, row, lane);
  for (; row < dst.rows; row += stride) {  // the same row across the warp
    RowLoads cur;
    if constexpr (kPrefetch) {
      cur = next;
      if (row + stride < dst.rows) next.issue(src, row + stride, lane);
    } else {
      cur.issue(src, row, lane);
    }
    float edge = cur.has_edge ? to_float(cur.edge) : kNegInf;
    float values[kN];
    if (cur.has_body) {
      cur.body.to_float(values);
    } else {
#pragma unroll
      for (int i = 0; i < kN; ++i) values[i] = kNegInf;
    }
    float thread_max = edge;
#pragma unroll
    for (int i = 0; i < kN; ++i) thread_max = fmaxf(thread_max, values[i]);
    const float row_max = warp_reduce<MaxOp>(thread_max);
    auto exp_of = [&](float v) { return softmax_exp2((v - row_max) * kLog2e); };
    edge = exp_of(edge);
    float thread_sum = edge;
#pragma unroll
    for (int i = 0; i < kN; ++i) {
      values[i] = exp_of(values[i]);
      thread_sum += values[i];
    }
    const float inv_sum = softmax_inv_sum<false>(warp_reduce<SumOp>(thread_sum));
    T* out = dst.out + row * dst.cols;
    if (cur.has_edge) out[cur.edge_col] = from_float<T>(edge * inv_sum);
    if (cur.has_body) {
#pragma unroll
      for (int i = 0; i < kN; ++i) values[i] *= inv_sum;
      Vec<T, kN> v;
      v.from_float(values);
      store_vec128_last(out + cur.head + lane * kN, v);  // whole (a Vec copy: 16-bit stores)
    }
  }
}

template <bool kPrefetch>
unsigned persistent_blocks(int64_t rows) {
  int sms = 0, per_sm = 0;
  CHECK_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  CHECK_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
      &per_sm, persistent_body_kernel<kPrefetch>, kSoftmaxWarpBlockThreads, 0));
  return unsigned(std::min<int64_t>((rows + kWarps - 1) / kWarps, int64_t(sms) * per_sm));
}

constexpr int kVariants = 4;
const char* kNames[kVariants] = {"library", "persistent", "persistent+prefetch", "copy"};

void run_shape(int64_t rows, int64_t cols, cudaStream_t s) {
  const int64_t n = rows * cols;
  RotatingSets buffers(n, -4.0f);
  const size_t bytes = buffers.bytes;
  const unsigned grid[2] = {persistent_blocks<false>(rows), persistent_blocks<true>(rows)};
  auto launch = [&](int k, T* y, T* x) {
    SoftmaxDst<T> d{y, rows, cols, false};
    SoftmaxArgs<T> a{y, x, rows, cols, cols, false};
    if (k == 0) {
      CHECK_CUDA(launch_softmax<T>(a, s));
    } else if (k == 1) {
      persistent_body_kernel<false><<<grid[0], kSoftmaxWarpBlockThreads, 0, s>>>(d, a);
    } else if (k == 2) {
      persistent_body_kernel<true><<<grid[1], kSoftmaxWarpBlockThreads, 0, s>>>(d, a);
    } else {
      CHECK_CUDA(cudaMemcpyAsync(y, x, bytes, cudaMemcpyDeviceToDevice, s));
    }
  };

  for (int k = 0; k + 1 < kVariants; ++k) {  // the kernels against float64
    const double worst = softmax_worst_error(k, buffers, rows, cols, s, launch);
    printf("%s %lldx%lld %-20s check: worst |err| / (1e-3 + ref) = %.3g%s\n", kDtype,
           (long long)rows, (long long)cols, kNames[k], worst, worst < 2e-2 ? "" : "  FAILED");
  }
  const std::vector<float> graph = graph_medians_us(kVariants, buffers, s, launch);
  const std::vector<float> single = one_call_medians_us(kVariants, buffers, s, launch);
  for (int k = 0; k < kVariants; ++k) {
    const float g = graph[k], e = single[k];
    printf("%s %lldx%lld %-20s graph %7.2f us (%4.1f%% of 4.27 TB/s), one call %7.2f us "
           "(%4.1f%%)\n",
           kDtype, (long long)rows, (long long)cols, kNames[k], g,
           100 * 2.0 * bytes / (g * 1e-6) / 4.27e12, e, 100 * 2.0 * bytes / (e * 1e-6) / 4.27e12);
  }
  printf("%s persistent grids: %u / %u blocks\n", kDtype, grid[0], grid[1]);
}

int main() {
  cudaStream_t s;
  CHECK_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  run_shape(64000, 250, s);  // the bench's 32 x 8 x 250 x 250
  run_shape(8000, 250, s);   // 4 x 8 x 250 x 250
  run_shape(64000, 249, s);
  return 0;
}
