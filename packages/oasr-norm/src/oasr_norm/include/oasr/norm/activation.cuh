// Elementwise activations y = act(x) and the gated linear unit y = a * sigmoid(b), x = [a | b].
//
// Inputs are [rows, cols] with a row stride (a contiguous tensor, or a channel slice x[..., :C]
// of a wider buffer, read where it is); outputs are contiguous. The math is float
// (activation_functors.cuh), rounded once to T.
//
// Memory-bound: each block takes a chunk of kActivationThreads * kSlots consecutive indices and
// each thread kSlots of them, every load of the thread issued before the first use. One block
// per chunk, no persistent grid: on the H200 a grid-stride walk over the resident capacity (4
// blocks/SM of 256 threads) took 1.00-1.17x PyTorch's time and this shape 0.88-1.01x.
// launch_activation picks one of three layouts from the pointers and strides (never from the
// data):
//   flat        contiguous rows (or a single row) are one span of rows * cols elements: no index
//               math; 128-bit accesses when both base addresses are 16-byte aligned, whatever the
//               width, with a scalar tail
//   rows, vec   row-strided input whose row starts are all 16-byte aligned and whose width is a
//               whole number of vectors: a flat vector index splits into (row, column) with an
//               IndexDivmod
//   rows, 1     anything else: the same walk one element at a time
// GLU always takes the row walk (its halves are half a row apart). Exact GELU of contiguous
// 16-bit tensors of 4M+ elements takes a table of every input's output instead (gelu_table.cuh:
// the same bits, 14% faster at 16M elements).
#pragma once

#include <algorithm>
#include <type_traits>

#include "oasr/common/types.h"
#include "oasr/common/vec_dtypes.h"
#include "oasr/common/arch_facts.h"
#include "oasr/common/index_divmod.cuh"
#include "oasr/norm/activation_functors.cuh"
#include "oasr/norm/gelu_table.cuh"

namespace oasr::norm {

constexpr int kActivationThreads = 128;
// Bytes per thread: two 128-bit vectors (one GLU pair); 64 bytes per thread or 256-thread blocks
// were 2-8% slower on the transcendental ops.
constexpr int kActivationStepBytes = 32;
// 16 blocks, a full SM of 2048 threads: ptxas holds the kernels at 32 registers (none spill;
// GELU took 39-45 and 10-12 resident blocks without the bound and the loop-free chunk below).
constexpr int kActivationMinBlocks = 2048 / kActivationThreads;

template <typename Slot>
inline constexpr int kStepSlots =
    std::clamp<int>(kActivationStepBytes / int(sizeof(Slot)), 1, 4);

template <typename T>
struct ActivationArgs {
  T* out;        // [rows, cols] contiguous
  const T* x;    // [rows, cols], row stride x_stride (elements)
  int64_t rows, cols, x_stride;
};

template <typename T>
struct GluArgs {
  T* out;        // [rows, cols] contiguous
  const T* x;    // [rows, 2 * cols], row stride x_stride: a = x[:, :cols], b = x[:, cols:]
  int64_t rows, cols, x_stride;
};

// Visits this block's chunk of [0, count): kSlots * kActivationThreads consecutive indices,
// `load(i, slot)` for each of the thread's indices (kActivationThreads apart) first, then
// `store(i, slot)`. No grid-stride loop: with it (and blockDim.x for the stride) the 16-bit
// kernels took 40-45 registers instead of 31, and GELU / tanh ran 4-13% slower on the H200.
template <typename Slot, int kSlots = kStepSlots<Slot>, typename Load, typename Store>
OASR_DEVICE void chunked_steps(int64_t count, Load&& load, Store&& store) {
  const int64_t base = int64_t(blockIdx.x) * (kActivationThreads * kSlots) + threadIdx.x;
  Slot slots[kSlots];
#pragma unroll
  for (int u = 0; u < kSlots; ++u) {
    if (base + u * kActivationThreads < count) load(base + u * kActivationThreads, slots[u]);
  }
#pragma unroll
  for (int u = 0; u < kSlots; ++u) {
    if (base + u * kActivationThreads < count) store(base + u * kActivationThreads, slots[u]);
  }
}

// y = act(x) for the N-element vector index v of the output. kFlat: x is contiguous like the
// output; otherwise v splits into (row, column vector) by vecs_per_row. kSlots vectors a thread.
template <Activation kAct, typename T, int N, bool kFlat, int kSlots = kStepSlots<Vec<T, N>>>
__global__ void __launch_bounds__(kActivationThreads, kActivationMinBlocks)
    activation_kernel(ActivationArgs<T> a, IndexDivmod vecs_per_row, int64_t num_vecs) {
  chunked_steps<Vec<T, N>, kSlots>(
      num_vecs,
      [&](int64_t v, Vec<T, N>& slot) {
        int64_t offset = v * N;
        if constexpr (!kFlat) {
          const int64_t row = vecs_per_row.div(v);
          offset = row * a.x_stride + (v - row * vecs_per_row.divisor) * N;
        }
        slot.load(a.x + offset);
      },
      [&](int64_t v, Vec<T, N>& slot) {
#pragma unroll
        for (int i = 0; i < N; ++i) slot[i] = from_float<T>(activate<kAct>(to_float(slot[i])));
        slot.store(a.out + v * N);
      });
  if constexpr (kFlat && N > 1) {
    // The last (rows * cols) % N elements, one thread of block 0 each.
    if (blockIdx.x == 0 && threadIdx.x < a.rows * a.cols - num_vecs * N) {
      const int64_t i = num_vecs * N + threadIdx.x;
      a.out[i] = from_float<T>(activate<kAct>(to_float(a.x[i])));
    }
  }
}

template <typename T, int N>
struct GluSlot {
  Vec<T, N> a, b;
};

// out[r, c] = x[r, c] * sigmoid(x[r, cols + c]) for the N-element vector index v of the output.
template <typename T, int N>
__global__ void __launch_bounds__(kActivationThreads, kActivationMinBlocks)
    glu_kernel(GluArgs<T> a, IndexDivmod vecs_per_row, int64_t num_vecs) {
  chunked_steps<GluSlot<T, N>>(
      num_vecs,
      [&](int64_t v, GluSlot<T, N>& slot) {
        const int64_t row = vecs_per_row.div(v);
        const T* x = a.x + row * a.x_stride + (v - row * vecs_per_row.divisor) * N;
        slot.a.load(x);
        slot.b.load(x + a.cols);
      },
      [&](int64_t v, GluSlot<T, N>& slot) {
#pragma unroll
        for (int i = 0; i < N; ++i) {
          const float gate = activate<Activation::kSigmoid>(to_float(slot.b[i]));
          slot.a[i] = from_float<T>(to_float(slot.a[i]) * gate);
        }
        slot.a.store(a.out + v * N);
      });
}

// How the contiguous launch spreads n elements (vectors of N) over threads: two vectors a thread
// where that makes at least a wave of blocks, else one vector where one-vector threads fill at
// least half a wave, else half a vector, so that more threads share a small tensor's
// transcendental math. wave_threads: the threads of a wave of blocks (every SM holding
// kActivationMinBlocks). H200, fp16 GELU (erff): 250 x 2048 2.65 us at two vectors, 2.42 at one,
// 2.31 at half; 1000 x 2048 5.07 at two, 4.66 at one, 5.24 at half. A quarter vector a thread
// (4-byte accesses) took every op at 250 x 2048 to 2.55-2.70 us.
enum class Grain { kTwoVectors, kOneVector, kHalfVector };

constexpr Grain contiguous_grain(int64_t n, int N, int64_t wave_threads) {
  const int64_t vecs = n / N;
  if (vecs >= 2 * wave_threads) return Grain::kTwoVectors;
  if (2 * vecs >= wave_threads) return Grain::kOneVector;
  return Grain::kHalfVector;
}

inline int64_t wave_threads() {
  int device = 0;
  cudaGetDevice(&device);
  return std::max<int64_t>(num_sms(device), 1) * kActivationMinBlocks * kActivationThreads;
}

// One block per chunk of indices (at least one block: the flat kernel's tail). A grid past
// 2^31 - 1 blocks (over 8 TB of 16-bit data) is refused, not walked.
template <typename Slot, int kSlots = kStepSlots<Slot>, typename Kernel, typename Args>
cudaError_t launch_chunked(Kernel kernel, const Args& a, IndexDivmod vecs_per_row,
                           int64_t num_vecs, cudaStream_t stream) {
  const int64_t chunks = ceil_div<int64_t>(num_vecs, int64_t(kActivationThreads) * kSlots);
  if (chunks > INT32_MAX) return cudaErrorInvalidConfiguration;
  const dim3 grid(static_cast<unsigned>(std::max<int64_t>(chunks, 1)));
  kernel<<<grid, kActivationThreads, 0, stream>>>(a, vecs_per_row, num_vecs);
  return cudaGetLastError();
}

template <Activation kAct, typename T>
cudaError_t launch_activation(const ActivationArgs<T>& a, cudaStream_t stream) {
  static_assert(kAct != Activation::kNone && kAct != Activation::kCount,
                "launch_activation needs a real activation");
  constexpr int N = kVec128<T>;
  const int64_t n = a.rows * a.cols;
  if constexpr (kAct == Activation::kGelu && sizeof(T) == 2) {
    // Large contiguous 16-bit tensors: the table kernel, same bits (gelu_table.cuh).
    if (n >= kGeluTableMinElements && gelu_table_fits(a.out, a.x, a.rows, a.cols, a.x_stride)) {
      bool ready;
      const cudaError_t err = make_gelu_tables(stream, &ready);
      if (err != cudaSuccess) return err;
      if (ready) return launch_gelu_table(a.out, a.x, n, stream);
    }
  }
  const bool bases_aligned = is_vec_aligned<T, N>(a.x) && is_vec_aligned<T, N>(a.out);
  if (a.rows == 1 || a.x_stride == a.cols) {
    if (bases_aligned) {
      static_assert(kStepSlots<Vec<T, N>> == 2, "kTwoVectors: a 16-byte vector is half a step");
      switch (contiguous_grain(n, N, wave_threads())) {
        case Grain::kTwoVectors:
          return launch_chunked<Vec<T, N>>(activation_kernel<kAct, T, N, true>, a, IndexDivmod(),
                                           n / N, stream);
        case Grain::kOneVector:
          return launch_chunked<Vec<T, N>, 1>(activation_kernel<kAct, T, N, true, 1>, a,
                                              IndexDivmod(), n / N, stream);
        default:
          return launch_chunked<Vec<T, N / 2>, 1>(activation_kernel<kAct, T, N / 2, true, 1>, a,
                                                  IndexDivmod(), n / (N / 2), stream);
      }
    }
    return launch_chunked<Vec<T, 1>>(activation_kernel<kAct, T, 1, true>, a, IndexDivmod(), n,
                                     stream);
  }
  if (bases_aligned && a.cols % N == 0 && a.x_stride % N == 0) {
    const int64_t num_vecs = a.rows * (a.cols / N);
    return launch_chunked<Vec<T, N>>(activation_kernel<kAct, T, N, false>, a,
                                     IndexDivmod(a.cols / N, num_vecs - 1), num_vecs, stream);
  }
  return launch_chunked<Vec<T, 1>>(activation_kernel<kAct, T, 1, false>, a,
                                   IndexDivmod(a.cols, n - 1), n, stream);
}

template <typename T>
cudaError_t launch_glu(const GluArgs<T>& a, cudaStream_t stream) {
  constexpr int N = kVec128<T>;
  if (is_vec_aligned<T, N>(a.x) && is_vec_aligned<T, N>(a.out) && a.cols % N == 0 &&
      a.x_stride % N == 0) {
    const int64_t num_vecs = a.rows * (a.cols / N);
    return launch_chunked<GluSlot<T, N>>(glu_kernel<T, N>, a,
                                         IndexDivmod(a.cols / N, num_vecs - 1), num_vecs, stream);
  }
  const int64_t n = a.rows * a.cols;
  return launch_chunked<GluSlot<T, 1>>(glu_kernel<T, 1>, a, IndexDivmod(a.cols, n - 1), n,
                                       stream);
}

}  // namespace oasr::norm
