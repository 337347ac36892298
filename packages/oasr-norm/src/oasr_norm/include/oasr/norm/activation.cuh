// Elementwise activations y = act(x) and the gated linear unit y = a * sigmoid(b), x = [a | b].
//
// Inputs are [rows, cols] with a row stride (a contiguous tensor, or a channel slice x[..., :C]
// of a wider buffer, read where it is); outputs are contiguous. The math is float
// (activation_functors.cuh), rounded once to T.
//
// Memory-bound: the grid is the resident capacity (num_sms * kActivationBlocksPerSm blocks of
// kActivationThreads) and each thread walks the data grid-stride, a step of accesses at a time
// with every load of the step issued before the first use. launch_activation picks one of three
// layouts from the pointers and strides (never from the data):
//   flat        contiguous rows (or a single row) are one span of rows * cols elements: no index
//               math; 128-bit accesses when both base addresses are 16-byte aligned, whatever the
//               width, with a scalar tail
//   rows, vec   row-strided input whose row starts are all 16-byte aligned and whose width is a
//               whole number of vectors: a flat vector index splits into (row, column) with an
//               IndexDivmod
//   rows, 1     anything else: the same walk one element at a time
// GLU always takes the row walk (its halves are half a row apart).
#pragma once

#include <algorithm>
#include <type_traits>

#include "oasr/common/types.h"
#include "oasr/common/vec_dtypes.h"
#include "oasr/norm/activation_functors.cuh"
#include "oasr/common/index_divmod.cuh"

namespace oasr::norm {

constexpr int kActivationThreads = 256;
constexpr int kActivationBlocksPerSm = 4;  // __launch_bounds__ holds the kernels to 64 registers
// Loads per thread per step: 4 resident blocks of 256 threads with 32 bytes each keep 32 KB of
// loads in flight per SM, ~3x what covers DRAM latency at the H200's copy bandwidth (~8 B/clk/SM
// of reads x ~1100 clk). Two 128-bit vectors (one GLU pair); four scalars on the scalar paths.
// Deeper steps made ptxas spill the fp16 erf/tanh kernels at the 64-register bound.
constexpr int kActivationStepBytes = 32;

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

// Visits every index in [0, count) grid-stride, kStepSlots<Slot> indices per step: `load(i,
// slot)` for each index of the step first, then `store(i, slot)`.
template <typename Slot, typename Load, typename Store>
OASR_DEVICE void grid_stride_steps(int64_t count, Load&& load, Store&& store) {
  constexpr int kSlots = kStepSlots<Slot>;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t base = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; base < count;
       base += stride * kSlots) {
    Slot slots[kSlots];
#pragma unroll
    for (int u = 0; u < kSlots; ++u) {
      if (base + u * stride < count) load(base + u * stride, slots[u]);
    }
#pragma unroll
    for (int u = 0; u < kSlots; ++u) {
      if (base + u * stride < count) store(base + u * stride, slots[u]);
    }
  }
}

// y = act(x) for the N-element vector index v of the output. kFlat: x is contiguous like the
// output; otherwise v splits into (row, column vector) by vecs_per_row.
template <Activation kAct, typename T, int N, bool kFlat>
__global__ void __launch_bounds__(kActivationThreads, kActivationBlocksPerSm)
    activation_kernel(ActivationArgs<T> a, IndexDivmod vecs_per_row, int64_t num_vecs) {
  grid_stride_steps<Vec<T, N>>(
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
    // The last (rows * cols) % N elements, one thread each.
    const int64_t i = num_vecs * N + int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < a.rows * a.cols) a.out[i] = from_float<T>(activate<kAct>(to_float(a.x[i])));
  }
}

template <typename T, int N>
struct GluSlot {
  Vec<T, N> a, b;
};

// out[r, c] = x[r, c] * sigmoid(x[r, cols + c]) for the N-element vector index v of the output.
template <typename T, int N>
__global__ void __launch_bounds__(kActivationThreads, kActivationBlocksPerSm)
    glu_kernel(GluArgs<T> a, IndexDivmod vecs_per_row, int64_t num_vecs) {
  grid_stride_steps<GluSlot<T, N>>(
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

// A grid of at most the resident capacity; at least one block (the flat kernel's tail).
template <typename Kernel, typename Args>
cudaError_t launch_grid_stride(Kernel kernel, const Args& a, IndexDivmod vecs_per_row,
                               int64_t num_vecs, int num_sms, cudaStream_t stream) {
  const int64_t wanted = ceil_div<int64_t>(num_vecs, kActivationThreads);
  const int64_t resident = int64_t(num_sms) * kActivationBlocksPerSm;
  const dim3 grid(static_cast<unsigned>(std::max<int64_t>(1, std::min(wanted, resident))));
  kernel<<<grid, kActivationThreads, 0, stream>>>(a, vecs_per_row, num_vecs);
  return cudaGetLastError();
}

template <Activation kAct, typename T>
cudaError_t launch_activation(const ActivationArgs<T>& a, int num_sms, cudaStream_t stream) {
  static_assert(kAct != Activation::kNone && kAct != Activation::kCount,
                "launch_activation needs a real activation");
  constexpr int N = kVec128<T>;
  const int64_t n = a.rows * a.cols;
  const bool bases_aligned = is_vec_aligned<T, N>(a.x) && is_vec_aligned<T, N>(a.out);
  if (a.rows == 1 || a.x_stride == a.cols) {
    if (bases_aligned) {
      return launch_grid_stride(activation_kernel<kAct, T, N, true>, a, IndexDivmod(), n / N,
                                num_sms, stream);
    }
    return launch_grid_stride(activation_kernel<kAct, T, 1, true>, a, IndexDivmod(), n, num_sms,
                              stream);
  }
  if (bases_aligned && a.cols % N == 0 && a.x_stride % N == 0) {
    const int64_t num_vecs = a.rows * (a.cols / N);
    return launch_grid_stride(activation_kernel<kAct, T, N, false>, a,
                              IndexDivmod(a.cols / N, num_vecs - 1), num_vecs, num_sms, stream);
  }
  return launch_grid_stride(activation_kernel<kAct, T, 1, false>, a, IndexDivmod(a.cols, n - 1),
                            n, num_sms, stream);
}

template <typename T>
cudaError_t launch_glu(const GluArgs<T>& a, int num_sms, cudaStream_t stream) {
  constexpr int N = kVec128<T>;
  if (is_vec_aligned<T, N>(a.x) && is_vec_aligned<T, N>(a.out) && a.cols % N == 0 &&
      a.x_stride % N == 0) {
    const int64_t num_vecs = a.rows * (a.cols / N);
    return launch_grid_stride(glu_kernel<T, N>, a, IndexDivmod(a.cols / N, num_vecs - 1),
                              num_vecs, num_sms, stream);
  }
  const int64_t n = a.rows * a.cols;
  return launch_grid_stride(glu_kernel<T, 1>, a, IndexDivmod(a.cols, n - 1), n, num_sms, stream);
}

// Calls f(std::integral_constant<Activation, kAct>{}) for the activation `act` names; returns
// false (calling nothing) for kNone or an unknown code.
template <typename F>
bool dispatch_activation(Activation act, F&& f) {
  using A = Activation;
  switch (act) {
    case A::kSwish: f(std::integral_constant<A, A::kSwish>{}); return true;
    case A::kRelu: f(std::integral_constant<A, A::kRelu>{}); return true;
    case A::kGelu: f(std::integral_constant<A, A::kGelu>{}); return true;
    case A::kGeluTanh: f(std::integral_constant<A, A::kGeluTanh>{}); return true;
    case A::kSigmoid: f(std::integral_constant<A, A::kSigmoid>{}); return true;
    case A::kTanh: f(std::integral_constant<A, A::kTanh>{}); return true;
    case A::kSwooshL: f(std::integral_constant<A, A::kSwooshL>{}); return true;
    case A::kSwooshR: f(std::integral_constant<A, A::kSwooshR>{}); return true;
    default: return false;
  }
}

}  // namespace oasr::norm
