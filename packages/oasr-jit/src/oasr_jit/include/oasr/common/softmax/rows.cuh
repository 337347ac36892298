// The softmax kernels' arguments, register capacity and row sources (oasr/common/softmax.cuh):
// a row source is how a kernel reads one row. The norm family's masked attention rows
// (oasr/norm/masked_softmax.cuh) are row sources of the same kernels, with kMasked set: a row
// that kept nothing is written as zeros, not NaN.
#pragma once

#include "oasr/common/types.h"
#include "oasr/common/vec_dtypes.h"

namespace oasr {

// Row values per thread held in registers: a warp holds 1024 values (attention rows up to
// Tk = 1024), a 512-thread block 16384 (CTC vocabularies up to 16384). A 1024-thread block is
// held to 64 registers, where ptxas spills 32 values: rows past 16384 take the two-pass kernel.
constexpr int kSoftmaxRegFloats = 32;
constexpr int kSoftmaxMaxRowThreads = 512;
constexpr int kSoftmaxWarpBlockThreads = 128;  // block of the warp-per-row kernels
constexpr int kSoftmaxLongRowThreads = 1024;

template <typename T>
struct SoftmaxArgs {
  T* out;        // [rows, cols] contiguous
  const T* x;    // [rows, cols], row stride x_stride (elements), unit column stride
  int64_t rows, cols, x_stride;
  bool log_output;
};

// What the shared kernel body writes: rows of `cols` values of out.
template <typename T>
struct SoftmaxDst {
  T* out;
  int64_t rows, cols;
  bool log_output;
};

// ---------------------------------------------------------------------------------------------
// Row sources: construct for a row, then load(col, values) N values at column col. Where
// kElementStores, out's rows may start anywhere and end on a partial vector: the kernels store
// element by element, up to the row's end (load gives -inf past it). Where kRealign, out's rows
// start anywhere and the kernels store through the realigning stores (stores.cuh).

template <typename T, int N>
struct DenseRow {
  using Params = SoftmaxArgs<T>;
  static constexpr bool kMasked = false;
  static constexpr bool kElementStores = false;  // out's vectors are whole and aligned
  static constexpr bool kRealign = false;
  const T* x;

  OASR_DEVICE DenseRow(const Params& p, int64_t row) : x(p.x + row * p.x_stride) {}

  OASR_DEVICE void load(int64_t col, float (&values)[N]) const {
    Vec<T, N> v;
    v.load(x + col);
    v.to_float(values);
  }
};

// Rows read in whole N-value vectors up to the next multiple of N, which the caller promises is
// readable (a GEMM's logits in a padded buffer: gemm_log_softmax at an odd vocabulary); the
// values past the end read as -inf. out's rows start anywhere, and the stores stay 16 bytes wide.
// kShiftStep is what out's rows start on, in values: N / 2 (store_realigned_halves: an odd
// multiple of N / 2 values), 2 (store_realigned_words: whole 32-bit words), 1 (store_realigned:
// anywhere). H200, 8000 rows, fp16 (us, against the vectors launch_softmax fits to the width and
// alignment, N / 2 down to single values):
//   V 8404  84 against 94-98 (81-83 for aligned rows of 8408); store_realigned: 114
//   V 1028  18.2; store_realigned: 21.2
//   V 10001 / 5001 / 4233 / 3001 / 2047 / 1025: 132 / 68 / 61 / 40 / 28 / 23 against
//           324 / 123 / 108 / 64 / 45 / 33
//   V 8402 / 5538 / 1026 (store_realigned_words): 108 / 62-63 / 19-20 against
//           117-122 / 72-75 / 23-25 through store_realigned
template <typename T, int N, int kStep>
struct PaddedDenseRow {
  using Params = SoftmaxArgs<T>;
  static constexpr bool kMasked = false;
  static constexpr bool kElementStores = false;
  static constexpr bool kRealign = true;
  static constexpr int kShiftStep = kStep;
  const T* x;
  int64_t cols;

  OASR_DEVICE PaddedDenseRow(const Params& p, int64_t row)
      : x(p.x + row * p.x_stride), cols(p.cols) {}

  OASR_DEVICE void load(int64_t col, float (&values)[N]) const {
    Vec<T, N> v;
    v.load(x + col);
    v.to_float(values);
    if (col + N > cols) {  // the row's last vector: padding past its end
#pragma unroll
      for (int i = 0; i < N; ++i) {
        if (kStep == N / 2 ? i >= N / 2 : col + i >= cols) values[i] = -__builtin_huge_valf();
      }
    }
  }
};

// Row sources of the aligned-body kernel: construct for a row, then first() (the scores' row,
// whose offset mod 16 bytes places the body), value(col) and body(col, values) (kVec128<T>
// values at an aligned col).
template <typename T>
struct AlignedBodyRow {
  using Params = SoftmaxArgs<T>;
  static constexpr bool kMasked = false;
  static constexpr int kN = kVec128<T>;
  const T* x;

  OASR_DEVICE AlignedBodyRow(const Params& p, int64_t row) : x(p.x + row * p.x_stride) {}
  OASR_DEVICE const T* first() const { return x; }
  OASR_DEVICE float value(int col) const { return to_float(x[col]); }
  OASR_DEVICE void body(int col, float (&values)[kN]) const {
    Vec<T, kN> vec;
    vec.load(x + col);
    vec.to_float(values);
  }
};

}  // namespace oasr
