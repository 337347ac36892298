// Row softmax, log-softmax and the masked attention softmax, in float32 (the norm family's
// softmax ops; gemm_log_softmax's row pass).
//
//   softmax         y = exp(x - m) / s,  m = max(x), s = sum(exp(x - m))      over each row
//   log_softmax     y = (x - m) - log(s)
//   masked_softmax  the softmax of z = scale * scores + bias over the positions a row keeps
//                   (mask true and key_padding_mask false; the others are z = -inf, output 0).
//                   A row with no finite z is all zeros, never NaN. Plain softmax keeps torch's
//                   answer for a row of -inf (NaN).
//
// log_softmax is a template parameter of every kernel: chosen per value at run time it cost the
// aligned-body kernel its whole gain (below).
//
// exp(x - m) is exp2((x - m) * log2e) with the hardware exp2. x - m is exact for the values that
// matter (Sterbenz), so the row's maximum gives exactly 1, as torch: folding m * log2e into one
// FFMA instead left its rounding in every term, which cancels in e / s but not in log(s).
//
// A row is held in registers while it is reduced (max, then the sum of exp, then the write: one
// read of the row from memory). By the row's width in vectors of N elements:
//   <= 32 vectors                   a group of 4..32 lanes of a warp per row, 128-thread blocks
//   <= 32 * kSoftmaxRegFloats / N   one warp per row, up to kSoftmaxRegFloats values per lane
//   <= 512 * kSoftmaxRegFloats / N  one block of 128, 256 or 512 threads per row, with the
//                                   fewest vectors per thread that cover it
//   longer                          one 1024-thread block per row in two passes: an online
//                                   (max, sum) over the row, then the write (re-reading the row,
//                                   mostly from L2)
// Lane j of a group holds vectors j, j + G, j + 2G, ...: each load instruction of a warp covers
// consecutive vectors. N is the widest power of two, up to 128 bits of T, that divides the width
// and the row stride and aligns both first rows: attention rows of 250 or 1500 halves take 4- and
// 8-byte vectors rather than single elements (2.1x slower than torch at 1500 when they did).
// Rows of 65 to 256 16-bit values that 8-byte vectors do not fit either, whose x and out rows sit
// at the same offset mod 16 bytes, are read instead as an aligned body of 16-byte vectors plus
// the few values before and after it (softmax_aligned_body_kernel; gemm_log_softmax's row pass
// takes it up to 512 values, two vectors a lane). Where the caller can promise that x's rows are
// readable past their end (launch_softmax_padded), 16-bit rows of any width
// and alignment keep 16-byte vectors both ways: PaddedDenseRow.
//
// masked_softmax reads scores [B, H, Tq, Tk] (unit stride over Tk), bias, mask and
// key_padding_mask through their own strides: a broadcast dim has stride 0, a relative-position
// window made with as_strided or a [..., ::ds] slice is read where it is. 16-bit rows of 65 to
// 256 keys with a bias and a key padding mask but no general mask (self-attention), scores and
// out at the same offset mod 16 bytes, take the aligned-body kernel (MaskedAlignedBodyRow).
// Otherwise, where every operand is unit-strided over Tk, a load takes two values of each
// (MaskedPairRow: as whole words where Tk is even and the rows of all but the bias start on a
// pair); else one (MaskedRow).
#pragma once

#include <climits>
#include <type_traits>

#include "oasr/common/index_divmod.cuh"
#include "oasr/common/reduction.h"
#include "oasr/common/types.h"
#include "oasr/common/vec_dtypes.h"

namespace oasr {

constexpr float kLog2e = 1.44269504088896341f;

// 2^x on the MUFU alone (ex2.approx.ftz): a result below 2^-126 (x < -126) is 0. exp2f keeps
// those as subnormals with a range test and two predicated multiplies around the MUFU, four
// instructions for one, and the short-row kernels are bound by instructions as much as by bytes
// (softmax over 250 keys: 27 instructions a value). A row's terms are exp(v - max) <= 1 and its
// sum >= 1, so each flushed term moves the sum, and the outputs, by less than 2^-126 relative.
OASR_DEVICE float softmax_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// 1 / x on the MUFU alone (rcp.approx.ftz), for x the caller knows lies in [2^-126, 2^126]:
// __fdividef tests for a subnormal divisor and rescales around the MUFU, three instructions.
OASR_DEVICE float rcp_approx_ftz(float x) {
  float y;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

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

// Every operand is [B, H, Tq, Tk] through its strides (0 for a broadcast dim).
template <typename T, typename TBias>
struct MaskedSoftmaxArgs {
  T* out;                             // [B, H, Tq, Tk] contiguous
  const T* scores;                    // strides scores_stride over B, H, Tq; unit over Tk
  const TBias* bias;                  // float: T or float32; or null
  const uint8_t* mask;                // bool, true = attend; or null
  const uint8_t* key_padding_mask;    // bool [B, Tk], true = padding; or null
  int64_t batch, heads, q_len, k_len;
  int64_t scores_stride[3];
  int64_t bias_stride[4];
  int64_t mask_stride[4];
  int64_t kpm_stride[2];
  float scale;
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
// start anywhere and the kernels store through store_realigned.

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

template <typename T, typename TBias>
struct MaskedRowParams {
  MaskedSoftmaxArgs<T, TBias> args;
  IndexDivmod by_q_len;  // row -> (b * H + h, q)
  IndexDivmod by_heads;  // b * H + h -> (b, h)
};

template <typename T, typename TBias>
struct MaskedRow {
  using Params = MaskedRowParams<T, TBias>;
  static constexpr bool kMasked = true;
  static constexpr bool kElementStores = false;
  static constexpr bool kRealign = false;
  const T* scores;
  const TBias* bias;
  const uint8_t* mask;
  const uint8_t* kpm;
  int64_t bias_step, mask_step, kpm_step;
  float scale;

  OASR_DEVICE MaskedRow(const Params& p, int64_t row) {
    const MaskedSoftmaxArgs<T, TBias>& a = p.args;
    const int64_t bh = p.by_q_len.div(row);
    const int64_t q = row - bh * a.q_len;
    const int64_t b = p.by_heads.div(bh);
    const int64_t h = bh - b * a.heads;
    scores = a.scores + b * a.scores_stride[0] + h * a.scores_stride[1] + q * a.scores_stride[2];
    bias = a.bias ? a.bias + b * a.bias_stride[0] + h * a.bias_stride[1] + q * a.bias_stride[2]
                  : nullptr;
    mask = a.mask ? a.mask + b * a.mask_stride[0] + h * a.mask_stride[1] + q * a.mask_stride[2]
                  : nullptr;
    kpm = a.key_padding_mask ? a.key_padding_mask + b * a.kpm_stride[0] : nullptr;
    bias_step = a.bias_stride[3];
    mask_step = a.mask_stride[3];
    kpm_step = a.kpm_stride[1];
    scale = a.scale;
  }

  // Every operand is loaded before the select, so the loads of a row issue together.
  OASR_DEVICE void load(int64_t k, float (&values)[1]) const {
    float z = to_float(scores[k]) * scale;
    if (bias) z += to_float(bias[k * bias_step]);
    const bool keep = (!mask || mask[k * mask_step] != 0) & (!kpm || kpm[k * kpm_step] == 0);
    values[0] = keep ? z : -__builtin_huge_valf();
  }
};

// v's bits ANDed with the low bits of m: v itself (m = ~0) or +0 (m = 0).
template <typename V>
OASR_DEVICE V and_bits(V v, uint32_t m) {
  static_assert(sizeof(V) == 2 || sizeof(V) == 4, "16- or 32-bit values");
  using Bits = std::conditional_t<sizeof(V) == 2, uint16_t, uint32_t>;
  Bits bits;
  memcpy(&bits, &v, sizeof(V));
  bits &= static_cast<Bits>(m);
  memcpy(&v, &bits, sizeof(V));
  return v;
}

// Masked rows two values a load, where every operand present has a unit step over Tk (the
// launcher checks). An absent operand reads the row's own scores instead, masked to what
// "absent" means (a bias to +0, a mask to "keep", a key padding mask to "not padded"), so no
// value tests a pointer. The bias is read an element at a time (a relative-position window,
// bias[b, h, q, k] = P[h, q + k], starts its rows on odd elements).
//   kAligned   Tk even, the rows of scores, out and the masks starting on a pair: scores as
//              one Vec, each mask as one 16-bit word, out stored as a Vec.
//   otherwise  any Tk and alignment (a padded batch of any length): every value an element at
//              a time, the last pair of an odd row half past its end, stores element by element.
// On the H200 at 32 x 4 x 250 x 250 with a key padding mask (oasr-norm's benchmarks/
// experiments/masked_softmax_pairs.cu), against MaskedRow, which is bound by its ~94
// instructions a value: kAligned, a dense bias 32.1 -> 19.4 us, a window 29.2 -> 17.8; by
// element at 249 keys 32.1 -> 24.8. The bias as one word where it is aligned would be 1-10%
// faster for a dense bias (1% at 250 keys, 6-10% at 500), but a branch on it costs as much.
template <typename T, typename TBias, bool kAligned>
struct MaskedPairRow {
  using Params = MaskedRowParams<T, TBias>;
  static constexpr bool kMasked = true;
  static constexpr bool kElementStores = !kAligned;
  static constexpr bool kRealign = false;
  const T* scores;
  const TBias* bias;    // the row's bias, or its scores (then TBias is no wider than T)
  const uint8_t* mask;  // bool bytes, or the scores' bytes
  const uint8_t* kpm;
  uint32_t bias_and;  // ~0, or 0 without a bias
  uint32_t mask_or;   // 0, or 0x0101 (keep both of a pair) without a mask
  uint32_t kpm_and;   // 0xffff, or 0 (pad neither) without a key padding mask
  float scale;
  int64_t cols;  // Tk

  OASR_DEVICE MaskedPairRow(const Params& p, int64_t row) {
    const MaskedRow<T, TBias> r(p, row);  // null where absent
    scores = r.scores;
    bias = r.bias ? r.bias : reinterpret_cast<const TBias*>(scores);
    const uint8_t* scores_bytes = reinterpret_cast<const uint8_t*>(scores);
    mask = r.mask ? r.mask : scores_bytes;
    kpm = r.kpm ? r.kpm : scores_bytes;
    bias_and = r.bias ? ~0u : 0u;
    mask_or = r.mask ? 0u : 0x0101u;
    kpm_and = r.kpm ? 0xffffu : 0u;
    scale = r.scale;
    cols = p.args.k_len;
  }

  OASR_DEVICE void load(int64_t k, float (&values)[2]) const {  // k even
    // kAligned: k + 1 < Tk. Otherwise the second value of the last pair of an odd row is
    // absent: its loads read column k again, and the value is -inf.
    const bool second = kAligned || k + 1 < cols;
    const int64_t k1 = second ? k + 1 : k;
    float s[2];
    uint32_t keep, pad;  // two bytes each: bit 0-7 value k, 8-15 value k + 1
    if constexpr (kAligned) {
      Vec<T, 2> v;
      v.load(scores + k);
      v.to_float(s);
      keep = uint32_t(reinterpret_cast<const uint16_t*>(mask)[k / 2]);
      pad = uint32_t(reinterpret_cast<const uint16_t*>(kpm)[k / 2]);
    } else {
      s[0] = to_float(scores[k]);
      s[1] = to_float(scores[k1]);
      keep = uint32_t(mask[k]) | (uint32_t(mask[k1]) << 8);
      pad = uint32_t(kpm[k]) | (uint32_t(kpm[k1]) << 8);
    }
    keep |= mask_or;
    pad &= kpm_and;
    const TBias z[2] = {and_bits(bias[k], bias_and), and_bits(bias[k1], bias_and)};
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const float v = fmaf(s[i], scale, to_float(z[i]));
      const bool kept = ((keep >> (8 * i)) & 0xffu) != 0 && ((pad >> (8 * i)) & 0xffu) == 0;
      values[i] = kept && (i == 0 || second) ? v : -__builtin_huge_valf();
    }
  }
};

// ---------------------------------------------------------------------------------------------
// Reductions over the threads of one row: lanes of a warp, or the whole block.

template <typename Op, int kGroupThreads, int kBlockThreads>
OASR_DEVICE float row_reduce(float value, float* smem_partials) {
  if constexpr (kGroupThreads <= kWarpSize) {
    return warp_reduce<Op, kGroupThreads>(value);
  } else {
    static_assert(kGroupThreads == kBlockThreads, "a row wider than a warp takes the whole block");
    return block_reduce<Op, kBlockThreads>(value, smem_partials);
  }
}

// The shift that exp is taken against: the row max, or 0 for a masked row that kept nothing (so
// exp(-inf - 0) = 0 and the row writes zeros).
template <bool kMasked>
OASR_DEVICE float softmax_shift(float row_max) {
  if constexpr (kMasked) {
    return row_max == -__builtin_huge_valf() ? 0.0f : row_max;
  } else {
    return row_max;
  }
}

// 1 / s, or 0 for a masked row that kept nothing (s = 0). s >= 1 otherwise (the max term is 1),
// so MUFU.RCP alone (rcp.approx.ftz) gives __fdividef(1, s)'s bits without its range test and
// rescale for subnormal s (four instructions a row in the issue-bound short-row kernels).
template <bool kMasked>
OASR_DEVICE float softmax_inv_sum(float row_sum) {
  const float inv_sum = rcp_approx_ftz(row_sum);
  if constexpr (kMasked) {
    return row_sum == 0.0f ? 0.0f : inv_sum;
  } else {
    return inv_sum;
  }
}

template <typename T, int N>
OASR_DEVICE void store_values(T* ptr, const float (&values)[N]) {
  Vec<T, N> v;
  v.from_float(values);
  v.store(ptr);
}

// A vector of values at column col of an output row: whole, or where Row::kElementStores,
// element by element up to the row's end.
template <typename Row, typename T, int N>
OASR_DEVICE void store_row_values(T* out_row, int64_t col, int64_t cols,
                                  const float (&values)[N]) {
  if constexpr (Row::kElementStores) {
#pragma unroll
    for (int i = 0; i < N; ++i) {
      if (col + i < cols) out_row[col + i] = from_float<T>(values[i]);
    }
  } else {
    store_values<T, N>(out_row + col, values);
  }
}

// A row of an odd multiple of N / 2 values held by a warp or more (vector j of lane l is column
// (j G + l) N), into out_row, which starts on a whole vector of N or half-way into one (V 8404).
// Half-way, each lane stores its upper half and the next lane's lower half (a shuffle) as one
// aligned vector; a warp's first lane stores its own lower half, and its last lane its upper
// half alone (the next vector's lane is in another warp). Every lane of the warp calls this.
// Columns are ints: with 64-bit ones the 512-thread kernel took 44 registers, two blocks an SM
// instead of three, and ran at 128 us instead of 84 (8000 x 8404). Stores of 8-byte pieces
// without the shuffle, each lane's two halves apart: 153 us.
template <typename T, int N, int kGroupThreads, int kVecs>
OASR_DEVICE void store_realigned_halves(T* out_row, int lane, int cols,
                                        const float (&values)[kVecs][N]) {
  static_assert(kGroupThreads % kWarpSize == 0, "rows of whole warps");
  static_assert(sizeof(T) * N == sizeof(uint4), "16-byte vectors");
  constexpr int kHalf = N / 2;
  const bool half_way = !is_vec_aligned<T, N>(out_row);
  const int warp_lane = threadIdx.x % kWarpSize;
  const auto store = [](T* ptr, auto words) { *reinterpret_cast<decltype(words)*>(ptr) = words; };
#pragma unroll
  for (int j = 0; j < kVecs; ++j) {
    const int col = (j * kGroupThreads + lane) * N;  // < 512 * kSoftmaxRegFloats
    Vec<T, N> v;
    v.from_float(values[j]);
    uint4 w;
    memcpy(&w, &v, sizeof(w));
    const uint2 lower = make_uint2(w.x, w.y), upper = make_uint2(w.z, w.w);
    const uint2 next_lower = make_uint2(__shfl_down_sync(0xffffffffu, w.x, 1),
                                        __shfl_down_sync(0xffffffffu, w.y, 1));
    if (!half_way) {
      if (col + N <= cols) {
        store(out_row + col, w);
      } else if (col < cols) {  // the row's last vector: its lower half
        store(out_row + col, lower);
      }
    } else {
      if (warp_lane == 0 && col < cols) store(out_row + col, lower);
      if (col + kHalf < cols) {
        if (warp_lane != kWarpSize - 1 && col + N < cols) {
          store(out_row + col + kHalf, make_uint4(upper.x, upper.y, next_lower.x, next_lower.y));
        } else {
          store(out_row + col + kHalf, upper);
        }
      }
    }
  }
}

// One lane's vector w (column col) of a row of 16-bit values stored into out_row kQ 32-bit words
// before a 16-byte boundary (store_realigned_words, below), given the next lane's first two words
// and the previous lane's last. Each lane stores one aligned vector: for kQ 1 and 2 its words
// from kQ on and the next lane's first kQ, a warp's first lane also its own first kQ; for kQ 3
// the previous lane's last word and its own first three, a warp's first lane its own three
// alone and its last lane its last word. The row's end goes word by word (cols is even).
template <int kQ, typename T>
OASR_DEVICE void store_word_shifted(T* out_row, int col, int cols, const uint32_t (&w)[4],
                                    const uint32_t (&next)[2], uint32_t prev_last) {
  const int warp_lane = threadIdx.x % kWarpSize;
  uint32_t* out_words = reinterpret_cast<uint32_t*>(out_row);  // word i: values 2 i, 2 i + 1
  const auto word_store = [&](int c, uint32_t word) {
    if (c < cols) out_words[c / 2] = word;
  };
  const auto vec_store = [&](int c, uint32_t a, uint32_t b, uint32_t d, uint32_t e) {
    *reinterpret_cast<uint4*>(out_row + c) = make_uint4(a, b, d, e);
  };
  constexpr int N = 8;
  if constexpr (kQ == 0) {
    if (col + N <= cols) {
      vec_store(col, w[0], w[1], w[2], w[3]);
    } else {
#pragma unroll
      for (int k = 0; k < 4; ++k) word_store(col + 2 * k, w[k]);
    }
  } else if constexpr (kQ == 3) {
    if (warp_lane != 0 && col + 6 <= cols) {
      vec_store(col - 2, prev_last, w[0], w[1], w[2]);
    } else {
      if (warp_lane != 0) word_store(col - 2, prev_last);
#pragma unroll
      for (int k = 0; k < 3; ++k) word_store(col + 2 * k, w[k]);
    }
    if (warp_lane == kWarpSize - 1) word_store(col + 6, w[3]);
  } else {
    if (warp_lane == 0) {
#pragma unroll
      for (int k = 0; k < kQ; ++k) word_store(col + 2 * k, w[k]);
    }
    if (warp_lane != kWarpSize - 1 && col + N + 2 * kQ <= cols) {
      if constexpr (kQ == 1) vec_store(col + 2, w[1], w[2], w[3], next[0]);
      if constexpr (kQ == 2) vec_store(col + 4, w[2], w[3], next[0], next[1]);
    } else {
#pragma unroll
      for (int k = kQ; k < 4; ++k) word_store(col + 2 * k, w[k]);
      if (warp_lane != kWarpSize - 1) {
#pragma unroll
        for (int k = 0; k < kQ; ++k) word_store(col + N + 2 * k, next[k]);
      }
    }
  }
}

// A row of an even number of 16-bit values held by a warp or more (vector j of lane l is column
// (j G + l) N) into out_row, which starts on a 32-bit word: V = 2 or 6 mod 8, where rows start 0,
// 1, 2 or 3 words before a 16-byte boundary (or any even V into an out on 4 bytes). The stores
// stay 16 bytes wide with three shuffles a vector, the neighbours' words any offset needs
// (store_word_shifted); store_realigned's byte permutes took four and the whole vector. The
// row's offset is the same for the whole row, so the switch does not diverge; the shuffles stay
// outside it, where the compiler need not treat them as divergent (with one or two inside each
// case: 976 instructions against 848, 1-2% slower on the H200). The switch sits inside the
// loop so that a vector's words live only through its stores (with it outside, 52 registers at
// 512 threads and 3 vectors; inside, 44, held to 40 without spills by
// softmax_realigned_rows_kernel).
template <typename T, int N, int kGroupThreads, int kVecs>
OASR_DEVICE void store_realigned_words(T* out_row, int lane, int cols,
                                       const float (&values)[kVecs][N]) {
  static_assert(kGroupThreads % kWarpSize == 0, "rows of whole warps");
  static_assert(sizeof(T) == 2 && N == 8, "16-byte vectors of 16-bit values");
  const int words_before = int((N - reinterpret_cast<uintptr_t>(out_row) / sizeof(T) % N) % N) / 2;
#pragma unroll
  for (int j = 0; j < kVecs; ++j) {
    const int col = (j * kGroupThreads + lane) * N;  // < 512 * kSoftmaxRegFloats
    Vec<T, N> v;
    v.from_float(values[j]);
    uint32_t w[4];
    memcpy(w, &v, sizeof(w));
    const uint32_t next[2] = {__shfl_down_sync(0xffffffffu, w[0], 1),
                              __shfl_down_sync(0xffffffffu, w[1], 1)};
    const uint32_t prev_last = __shfl_up_sync(0xffffffffu, w[3], 1);
    switch (words_before) {
      case 0: store_word_shifted<0>(out_row, col, cols, w, next, prev_last); break;
      case 1: store_word_shifted<1>(out_row, col, cols, w, next, prev_last); break;
      case 2: store_word_shifted<2>(out_row, col, cols, w, next, prev_last); break;
      default: store_word_shifted<3>(out_row, col, cols, w, next, prev_last); break;
    }
  }
}

// The 16-byte vector of out that starts 2 kQ + odd values into a lane's vector: its values from
// there and the next lane's before it. words: the lane's 4 words, then the next lane's.
template <int kQ>
OASR_DEVICE uint4 shifted_vector(const uint32_t (&words)[8], bool odd) {
  // odd: a word of the result is the upper half of one word and the lower half of the next
  const auto word = [&](int k) {
    return odd ? __byte_perm(words[kQ + k], words[kQ + k + 1], 0x5432) : words[kQ + k];
  };
  return make_uint4(word(0), word(1), word(2), word(3));
}

// Value i of a vector of 16-bit values held as 32-bit words.
OASR_DEVICE uint16_t word_half(const uint32_t* words, int i) {
  return uint16_t(words[i / 2] >> (16 * (i % 2)));
}

// A row's vectors stored into out_row at a 16-byte boundary `shift` = 2 kQ + odd values into
// them (store_realigned, below).
template <int kQ, int N, int kGroupThreads, int kVecs>
OASR_DEVICE void store_shifted(uint16_t* out_bits, int lane, int cols, bool odd,
                               const uint32_t (&packed)[kVecs][4]) {
  const int shift = 2 * kQ + int(odd);
  const int warp_lane = threadIdx.x % kWarpSize;
  const int count = warp_lane == kWarpSize - 1 ? N - shift : N;  // the last lane: its own only
#pragma unroll
  for (int j = 0; j < kVecs; ++j) {
    const int col = (j * kGroupThreads + lane) * N;  // < 512 * kSoftmaxRegFloats
    uint32_t words[8];  // this lane's vector, then the next lane's
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      words[k] = packed[j][k];
      words[4 + k] = __shfl_down_sync(0xffffffffu, packed[j][k], 1);
    }
    if (warp_lane == 0) {  // its values before the boundary: the last lane before it cannot
#pragma unroll
      for (int i = 0; i < N - 1; ++i) {
        if (i < shift && col + i < cols) out_bits[col + i] = word_half(words, i);
      }
    }
    const uint4 out_vec = shifted_vector<kQ>(words, odd);
    const int start = col + shift;
    if (count == N && start + N <= cols) {
      *reinterpret_cast<uint4*>(out_bits + start) = out_vec;
    } else {
      const uint32_t out_words[4] = {out_vec.x, out_vec.y, out_vec.z, out_vec.w};
#pragma unroll
      for (int i = 0; i < N; ++i) {
        if (i < count && start + i < cols) out_bits[start + i] = word_half(out_words, i);
      }
    }
  }
}

// A row of 16-bit values held by a warp or more (vector j of lane l is column (j G + l) N), into
// out_row, which may start anywhere: `shift` = its values before the first 16-byte boundary. Each
// lane stores one aligned 16-byte vector of out, its own values from `shift` on and the next
// lane's before it (a shuffle, then byte permutes). A warp's first lane also stores its own
// values before `shift`, and its last lane only its own values (the next lane is in another
// warp), value by value, as do the ends of the row. Every lane of the warp calls this; `shift`
// is the same for all (one row a warp or a block), so its branches do not diverge. The values
// are packed to 16 bits first, so 12 registers of words, not 24 of floats, live across the
// stores (softmax_realigned_rows_kernel's bounds hold it to 40).
template <typename T, int N, int kGroupThreads, int kVecs>
OASR_DEVICE void store_realigned(T* out_row, int lane, int cols, const float (&values)[kVecs][N]) {
  static_assert(kGroupThreads % kWarpSize == 0, "rows of whole warps");
  static_assert(sizeof(T) == 2 && N == 8, "16-byte vectors of 16-bit values");
  uint32_t packed[kVecs][4];
#pragma unroll
  for (int j = 0; j < kVecs; ++j) {
    Vec<T, N> v;
    v.from_float(values[j]);
    memcpy(packed[j], &v, sizeof(uint4));
  }
  uint16_t* out_bits = reinterpret_cast<uint16_t*>(out_row);
  const int shift = int((N - reinterpret_cast<uintptr_t>(out_row) / sizeof(T) % N) % N);
  const bool odd = shift % 2 != 0;
  switch (shift / 2) {
    case 0:
      if (odd) return store_shifted<0, N, kGroupThreads, kVecs>(out_bits, lane, cols, odd, packed);
      break;  // aligned: below
    case 1: return store_shifted<1, N, kGroupThreads, kVecs>(out_bits, lane, cols, odd, packed);
    case 2: return store_shifted<2, N, kGroupThreads, kVecs>(out_bits, lane, cols, odd, packed);
    default: return store_shifted<3, N, kGroupThreads, kVecs>(out_bits, lane, cols, odd, packed);
  }
#pragma unroll
  for (int j = 0; j < kVecs; ++j) {
    const int col = (j * kGroupThreads + lane) * N;
    if (col + N <= cols) {
      const uint4 whole = make_uint4(packed[j][0], packed[j][1], packed[j][2], packed[j][3]);
      *reinterpret_cast<uint4*>(out_bits + col) = whole;
    } else {
#pragma unroll
      for (int i = 0; i < N; ++i) {
        if (col + i < cols) out_bits[col + i] = word_half(packed[j], i);
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Register-resident rows: kGroupThreads threads per row, kVecs vectors of N per thread.

template <typename Row, typename T, int N, int kGroupThreads, int kVecs, int kBlockThreads,
          bool kLog>
OASR_DEVICE void softmax_rows(const SoftmaxDst<T>& dst, const typename Row::Params& src) {
  static_assert(kBlockThreads % kGroupThreads == 0, "whole rows per block");
  constexpr int kRowsPerBlock = kBlockThreads / kGroupThreads;
  constexpr float kNegInf = -__builtin_huge_valf();
  __shared__ float smem_partials[kBlockThreads / kWarpSize];
  const int lane = threadIdx.x % kGroupThreads;
  // One tile of rows per block (a grid-stride loop over tiles made ptxas spill a register).
  const int64_t row = int64_t(blockIdx.x) * kRowsPerBlock + threadIdx.x / kGroupThreads;
  const bool row_valid = row < dst.rows;  // a group past the last row still joins the shuffles
  const Row src_row(src, row_valid ? row : 0);

  float values[kVecs][N];  // [kVecs, N]: vector j of this lane is column (j * G + lane) * N
  float thread_max = kNegInf;
#pragma unroll
  for (int j = 0; j < kVecs; ++j) {
    const int col = (j * kGroupThreads + lane) * N;  // < 512 * kSoftmaxRegFloats
    if (row_valid && col < dst.cols) {
      src_row.load(col, values[j]);
    } else {
#pragma unroll
      for (int i = 0; i < N; ++i) values[j][i] = kNegInf;
    }
#pragma unroll
    for (int i = 0; i < N; ++i) thread_max = fmaxf(thread_max, values[j][i]);
  }
  const float row_max =
      row_reduce<MaxOp, kGroupThreads, kBlockThreads>(thread_max, smem_partials);
  const float shift = softmax_shift<Row::kMasked>(row_max);

  float thread_sum = 0.0f;
  if constexpr (kLog) {
#pragma unroll
    for (int j = 0; j < kVecs; ++j) {
#pragma unroll
      for (int i = 0; i < N; ++i) thread_sum += softmax_exp2((values[j][i] - shift) * kLog2e);
    }
  } else {
#pragma unroll
    for (int j = 0; j < kVecs; ++j) {
#pragma unroll
      for (int i = 0; i < N; ++i) {
        values[j][i] = softmax_exp2((values[j][i] - shift) * kLog2e);
        thread_sum += values[j][i];
      }
    }
  }
  const float row_sum = row_reduce<SumOp, kGroupThreads, kBlockThreads>(thread_sum, smem_partials);

  if (row_valid) {
    T* out_row = dst.out + row * dst.cols;
    const float inv_sum = softmax_inv_sum<Row::kMasked>(row_sum);
    const float log_sum = kLog ? logf(row_sum) : 0.0f;
    if constexpr (Row::kRealign) {
#pragma unroll
      for (int j = 0; j < kVecs; ++j) {
#pragma unroll
        for (int i = 0; i < N; ++i) {
          values[j][i] = kLog ? (values[j][i] - shift) - log_sum : values[j][i] * inv_sum;
        }
      }
      // cols <= 512 * kSoftmaxRegFloats (launch_softmax_padded)
      if constexpr (Row::kShiftStep == N / 2) {
        store_realigned_halves<T, N, kGroupThreads, kVecs>(out_row, lane, int(dst.cols), values);
      } else if constexpr (Row::kShiftStep == 2) {
        store_realigned_words<T, N, kGroupThreads, kVecs>(out_row, lane, int(dst.cols), values);
      } else {
        store_realigned<T, N, kGroupThreads, kVecs>(out_row, lane, int(dst.cols), values);
      }
    } else {
#pragma unroll
      for (int j = 0; j < kVecs; ++j) {
        const int col = (j * kGroupThreads + lane) * N;
        if (col < dst.cols) {
#pragma unroll
          for (int i = 0; i < N; ++i) {
            values[j][i] = kLog ? (values[j][i] - shift) - log_sum : values[j][i] * inv_sum;
          }
          store_row_values<Row, T, N>(out_row, col, dst.cols, values[j]);
        }
      }
    }
  }
}

template <typename Row, typename T, int N, int kGroupThreads, int kVecs, int kBlockThreads,
          bool kLog>
__global__ void __launch_bounds__(kBlockThreads)
    softmax_rows_kernel(SoftmaxDst<T> dst, typename Row::Params src) {
  softmax_rows<Row, T, N, kGroupThreads, kVecs, kBlockThreads, kLog>(dst, src);
}

// Realigned rows (Row::kRealign) of up to 3 vectors a thread are held to 40 registers, the
// occupancy of DenseRow's kernels (48 warps an SM): store_realigned's shuffled words took them
// to 44, two 512-thread blocks an SM instead of three. H200, 8000 rows: V 10001 158 -> 132 us
// (V 8402: 138 -> 116) with 24 bytes spilled, the rest within 2%. store_realigned_words' rows
// also take 44 and fit 40 without a spill; the halves' take 40 as they are.
template <int kVecs, int kBlockThreads>
constexpr int realigned_rows_min_blocks() {
  return kVecs <= 3 ? 48 * kWarpSize / kBlockThreads : 1;
}

template <typename Row, typename T, int N, int kGroupThreads, int kVecs, int kBlockThreads,
          bool kLog>
__global__ void __launch_bounds__(kBlockThreads,
                                  (realigned_rows_min_blocks<kVecs, kBlockThreads>()))
    softmax_realigned_rows_kernel(SoftmaxDst<T> dst, typename Row::Params src) {
  softmax_rows<Row, T, N, kGroupThreads, kVecs, kBlockThreads, kLog>(dst, src);
}

// One 16-byte store of v, as the thread's last memory access. Here a copy of the Vec
// (Vec::store) came out of the compiler as 16-bit stores, merged by ptxas only into four 32-bit
// ones: the conversions to 16 bits (inline asm) were scheduled between the stores, which the
// compiler does not combine across asm. (Elsewhere the copy is one STG.128, checked in SASS.)
template <typename T>
OASR_DEVICE void store_vec128_last(T* ptr, const Vec<T, kVec128<T>>& v) {
  uint4 w;
  memcpy(&w, &v, sizeof(w));
  asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(ptr), "r"(w.x), "r"(w.y),
               "r"(w.z), "r"(w.w)
               : "memory");
}

// ---------------------------------------------------------------------------------------------
// Rows that 8-byte vectors do not divide either (250 halves: row r starts at 500 r bytes): a
// warp per row reads the row's 16-byte aligned body, one vector a lane (rows of up to 256), and
// one lane each takes a value of the head before it or the tail after it (at most kN - 1 each).
// out's rows have the same offset mod 16 bytes as x's. On the H200 at 64000 x 250 halves
// (oasr-norm's benchmarks/experiments/softmax_aligned_body.cu): 22.6 -> 19.8 us against the
// 4-byte vectors of softmax_rows_kernel as graph replays, 25.1 -> 21.8 us one call between
// events. log_softmax is a template parameter: chosen at run time, per value, it cost the whole
// gain (22.1 us). Not taken where 8-byte vectors fit (252 halves: 18.2 against 19.8 us) or for
// two vectors a lane (500 halves: 35.7 against 19.7).

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

// masked_softmax rows without a general mask (a bias and a key padding mask: Zipformer's and
// Conformer's self-attention). The bias's body is 16-byte vectors too where the launcher proved
// its rows at the scores' offset mod 16 bytes (kBiasVectors: a dense bias, or none, read from
// the scores and zeroed), else an element at a time (a relative-position window, whose rows
// start one element apart; its table is a few KB, so these loads hit L1); the key padding mask
// a byte at a time (every row of a batch entry reads the same one).
// The launcher checked that rows and every operand's offsets fit in 31 bits, so the row's
// (b, h, q) and offsets are 32-bit arithmetic: a warp per row pays them per row, and the kernel
// is bound by instruction issue (ncu at 32 x 4 x 250 x 250: issue slots ~75% busy, DRAM at 45%;
// 354 instructions a row with 64-bit offsets, 289 now).
template <typename T, bool kBiasVectors, bool kPadding>
struct MaskedAlignedBodyRow {
  using Params = MaskedRowParams<T, T>;
  static constexpr bool kMasked = true;
  static constexpr int kN = kVec128<T>;
  const T* scores;
  const T* bias;       // the row's bias, or its scores
  const uint8_t* kpm;  // kPadding: the row's key padding mask
  uint32_t bias_and;   // ~0, or 0 without a bias
  float scale;

  OASR_DEVICE MaskedAlignedBodyRow(const Params& p, int64_t row) {
    const MaskedSoftmaxArgs<T, T>& a = p.args;
    const uint32_t bh = p.by_q_len.div_fast(static_cast<uint32_t>(row));
    const uint32_t q = static_cast<uint32_t>(row) - bh * static_cast<uint32_t>(a.q_len);
    const uint32_t b = p.by_heads.div_fast(bh);
    const uint32_t h = bh - b * static_cast<uint32_t>(a.heads);
    const auto offset = [&](const int64_t* strides) {
      return b * static_cast<uint32_t>(strides[0]) + h * static_cast<uint32_t>(strides[1]) +
             q * static_cast<uint32_t>(strides[2]);
    };
    scores = a.scores + offset(a.scores_stride);
    bias = a.bias ? a.bias + offset(a.bias_stride) : scores;
    bias_and = a.bias ? ~0u : 0u;
    if constexpr (kPadding) kpm = a.key_padding_mask + b * static_cast<uint32_t>(a.kpm_stride[0]);
    scale = a.scale;
  }
  OASR_DEVICE const T* first() const { return scores; }
  OASR_DEVICE float value(int col) const {
    const float z = fmaf(to_float(scores[col]), scale, to_float(and_bits(bias[col], bias_and)));
    return !kPadding || kpm[col] == 0 ? z : -__builtin_huge_valf();
  }
  OASR_DEVICE void body(int col, float (&values)[kN]) const {
    // Every operand is loaded before the first select, so a row's loads issue together.
    Vec<T, kN> s, z;
    s.load(scores + col);
    if constexpr (kBiasVectors) {
      z.load(bias + col);
    } else {
#pragma unroll
      for (int i = 0; i < kN; ++i) z[i] = bias[col + i];
    }
    uint8_t pad[kN];
    if constexpr (kPadding) {
#pragma unroll
      for (int i = 0; i < kN; ++i) pad[i] = kpm[col + i];
    }
    uint32_t words[kN / 2];
    memcpy(words, &z, sizeof(words));
#pragma unroll
    for (int i = 0; i < kN / 2; ++i) words[i] &= bias_and;
    memcpy(&z, words, sizeof(words));
#pragma unroll
    for (int i = 0; i < kN; ++i) {
      const float v = fmaf(to_float(s[i]), scale, to_float(z[i]));
      values[i] = !kPadding || pad[i] == 0 ? v : -__builtin_huge_valf();
    }
  }
};

template <typename Row, typename T, bool kLog, int kBodyVecs = 1>
__global__ void __launch_bounds__(kSoftmaxWarpBlockThreads)
    softmax_aligned_body_kernel(SoftmaxDst<T> dst, typename Row::Params src) {
  constexpr int kN = kVec128<T>;
  static_assert(kWarpSize >= 2 * (kN - 1), "every head and tail value has a lane");
  constexpr float kNegInf = -__builtin_huge_valf();
  const int lane = threadIdx.x % kWarpSize;
  const int64_t row =
      int64_t(blockIdx.x) * (kSoftmaxWarpBlockThreads / kWarpSize) + threadIdx.x / kWarpSize;
  const bool row_valid = row < dst.rows;  // a warp past the last row still joins the shuffles
  const Row x(src, row_valid ? row : 0);
  const int cols = static_cast<int>(dst.cols);  // <= kBodyVecs 256: 32 body vectors a lane each
  const int misalign = static_cast<int>(reinterpret_cast<uintptr_t>(x.first()) % 16 / sizeof(T));
  const int head = min(misalign ? kN - misalign : 0, cols);
  const int body = (cols - head) / kN;
  const int tail = cols - head - body * kN;

  // Lane < head holds head value `lane`; head <= lane < head + tail, tail value lane - head;
  // body vectors lane, lane + 32, ... Absent values are -inf: they add exp(-inf) = 0 to the sum
  // and are never stored.
  bool has_body[kBodyVecs];
  float values[kBodyVecs][kN];
#pragma unroll
  for (int j = 0; j < kBodyVecs; ++j) {
    has_body[j] = row_valid && j * kWarpSize + lane < body;
    if (has_body[j]) {
      x.body(head + (j * kWarpSize + lane) * kN, values[j]);
    } else {
#pragma unroll
      for (int i = 0; i < kN; ++i) values[j][i] = kNegInf;
    }
  }
  const bool has_edge = row_valid && lane < head + tail;
  const int edge_col = lane < head ? lane : head + body * kN + (lane - head);
  float edge = has_edge ? x.value(edge_col) : kNegInf;
  float thread_max = edge;
#pragma unroll
  for (int j = 0; j < kBodyVecs; ++j) {
#pragma unroll
    for (int i = 0; i < kN; ++i) thread_max = fmaxf(thread_max, values[j][i]);
  }
  const float row_max = warp_reduce<MaxOp>(thread_max);
  const float shift = softmax_shift<Row::kMasked>(row_max);

  // softmax: one FFMA a value, v log2e - shift log2e (this kernel is bound by instruction issue).
  // The rounding of shift log2e scales every term and the sum alike, so it cancels in e / s; in
  // log(s) it would not, so log_softmax keeps the exact difference.
  const float shift_log2e = shift * kLog2e;
  auto exp_of = [&](float v) {
    return softmax_exp2(kLog ? (v - shift) * kLog2e : fmaf(v, kLog2e, -shift_log2e));
  };
  float thread_sum = exp_of(edge);
  if constexpr (!kLog) edge = exp_of(edge);
#pragma unroll
  for (int j = 0; j < kBodyVecs; ++j) {
#pragma unroll
    for (int i = 0; i < kN; ++i) {
      const float e = exp_of(values[j][i]);
      thread_sum += e;
      if constexpr (!kLog) values[j][i] = e;
    }
  }
  const float row_sum = warp_reduce<SumOp>(thread_sum);
  if (!row_valid) return;

  const float inv_sum = softmax_inv_sum<Row::kMasked>(row_sum);
  const float log_sum = kLog ? logf(row_sum) : 0.0f;
  auto finish = [&](float v) { return kLog ? (v - shift) - log_sum : v * inv_sum; };
  T* out = dst.out + row * dst.cols;
  if (has_edge) out[edge_col] = from_float<T>(finish(edge));
#pragma unroll
  for (int j = 0; j < kBodyVecs; ++j) {
    if (has_body[j]) {
#pragma unroll
      for (int i = 0; i < kN; ++i) values[j][i] = finish(values[j][i]);
      Vec<T, kN> v;
      v.from_float(values[j]);
      store_vec128_last(out + head + (j * kWarpSize + lane) * kN, v);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Rows past the register capacity: a block per row, an online (max, sum) pass, then the write.

template <typename Row, typename T, int N, bool kLog>
__global__ void __launch_bounds__(kSoftmaxLongRowThreads)
    softmax_long_rows_kernel(SoftmaxDst<T> dst, typename Row::Params src) {
  constexpr float kNegInf = -__builtin_huge_valf();
  __shared__ float smem_partials[kSoftmaxLongRowThreads / kWarpSize];
  const int64_t row = blockIdx.x;
  const Row src_row(src, row);
  // Running max m and sum s of exp(x - m) over this thread's columns; -inf adds nothing (a
  // masked position, or torch's all -inf row, which ends as NaN through exp(-inf - -inf)).
  float m = kNegInf, s = 0.0f;
  for (int64_t col = int64_t(threadIdx.x) * N; col < dst.cols;
       col += int64_t(kSoftmaxLongRowThreads) * N) {
    float values[N];
    src_row.load(col, values);
#pragma unroll
    for (int i = 0; i < N; ++i) {
      const float v = values[i];
      if (v > m) {
        s = s * softmax_exp2((m - v) * kLog2e) + 1.0f;
        m = v;
      } else if (v != kNegInf) {
        s += softmax_exp2((v - m) * kLog2e);
      }
    }
  }
  const float row_max = block_reduce<MaxOp, kSoftmaxLongRowThreads>(m, smem_partials);
  const float scaled_s = m == kNegInf ? 0.0f : s * softmax_exp2((m - row_max) * kLog2e);
  const float row_sum = block_reduce<SumOp, kSoftmaxLongRowThreads>(scaled_s, smem_partials);

  const float shift = softmax_shift<Row::kMasked>(row_max);
  const float inv_sum = softmax_inv_sum<Row::kMasked>(row_sum);
  const float log_sum = kLog ? logf(row_sum) : 0.0f;
  T* out_row = dst.out + row * dst.cols;
  for (int64_t col = int64_t(threadIdx.x) * N; col < dst.cols;
       col += int64_t(kSoftmaxLongRowThreads) * N) {
    float values[N];
    src_row.load(col, values);
#pragma unroll
    for (int i = 0; i < N; ++i) {
      values[i] = kLog ? (values[i] - shift) - log_sum
                                 : softmax_exp2((values[i] - shift) * kLog2e) * inv_sum;
    }
    store_row_values<Row, T, N>(out_row, col, dst.cols, values);
  }
}

// ---------------------------------------------------------------------------------------------
// Host side: the kernel whose capacity first covers the row.

template <typename Row, typename T, int N, int kGroupThreads, int kVecs, int kBlockThreads>
cudaError_t launch_softmax_rows(const SoftmaxDst<T>& dst, const typename Row::Params& src,
                                cudaStream_t stream) {
  constexpr int kRowsPerBlock = kBlockThreads / kGroupThreads;
  const int64_t tiles = ceil_div<int64_t>(dst.rows, kRowsPerBlock);
  if (tiles > INT_MAX) return cudaErrorInvalidValue;  // launchers refuse >= 2^31 rows first
  const dim3 grid(static_cast<unsigned>(tiles));
  if constexpr (Row::kRealign) {  // only log_softmax's (gemm_log_softmax) rows are realigned
    if (!dst.log_output) return cudaErrorNotSupported;
    if constexpr (Row::kShiftStep == N / 2) {  // 40 registers as it is
      softmax_rows_kernel<Row, T, N, kGroupThreads, kVecs, kBlockThreads, true>
          <<<grid, kBlockThreads, 0, stream>>>(dst, src);
    } else {
      softmax_realigned_rows_kernel<Row, T, N, kGroupThreads, kVecs, kBlockThreads, true>
          <<<grid, kBlockThreads, 0, stream>>>(dst, src);
    }
    return cudaGetLastError();
  } else {
    if constexpr (!Row::kMasked) {  // masked rows are never log_softmax
      if (dst.log_output) {
        softmax_rows_kernel<Row, T, N, kGroupThreads, kVecs, kBlockThreads, true>
            <<<grid, kBlockThreads, 0, stream>>>(dst, src);
        return cudaGetLastError();
      }
    }
    softmax_rows_kernel<Row, T, N, kGroupThreads, kVecs, kBlockThreads, false>
        <<<grid, kBlockThreads, 0, stream>>>(dst, src);
    return cudaGetLastError();
  }
}

// The vectors per thread of a 512-thread block after kVecs: every count to 8, then 12, 16, 24, 32.
constexpr int next_block_vecs(int vecs) {
  return vecs < 8 ? vecs + 1 : ((vecs & (vecs - 1)) == 0 ? vecs + vecs / 2 : vecs / 3 * 4);
}

// Rows past a warp's capacity: a block per row with the fewest vectors per thread that cover it,
// up to 4 at 128, then 256 threads, then any count at 512 (next_block_vecs). Every slot a thread
// holds costs registers whether the row fills it or not: on the H200, rows of 1500 halves ran
// at 2.2 TB/s with 8 slots per thread of which 3 were used and at 4.2 TB/s with exactly 3
// (oasr-norm's benchmarks/experiments/softmax_rows.cu). A shape no wider than the one before it
// is never chosen, so it is not instantiated.
template <typename Row, typename T, int N, int kBlockThreads = 128, int kVecs = 1>
cudaError_t launch_softmax_block_rows(const SoftmaxDst<T>& dst, const typename Row::Params& src,
                                      int64_t vecs, cudaStream_t stream) {
  constexpr int kMaxVecs = kSoftmaxRegFloats / N;
  constexpr int64_t kCapacity = int64_t(kBlockThreads) * kVecs;
  if constexpr (Row::kRealign &&
                (kBlockThreads > kSoftmaxMaxRowThreads || kVecs > kMaxVecs)) {
    return cudaErrorNotSupported;  // rows past the registers: launch_softmax_padded checks
  } else if constexpr (kBlockThreads > kSoftmaxMaxRowThreads || kVecs > kMaxVecs) {
    if (dst.rows > INT_MAX) return cudaErrorInvalidValue;
    const dim3 grid(static_cast<unsigned>(dst.rows));
    if constexpr (!Row::kMasked) {
      if (dst.log_output) {
        softmax_long_rows_kernel<Row, T, N, true>
            <<<grid, kSoftmaxLongRowThreads, 0, stream>>>(dst, src);
        return cudaGetLastError();
      }
    }
    softmax_long_rows_kernel<Row, T, N, false>
        <<<grid, kSoftmaxLongRowThreads, 0, stream>>>(dst, src);
    return cudaGetLastError();
  } else {
    if constexpr (kCapacity > int64_t(kWarpSize) * kMaxVecs) {
      if (vecs <= kCapacity) {
        return launch_softmax_rows<Row, T, N, kBlockThreads, kVecs, kBlockThreads>(dst, src,
                                                                                  stream);
      }
    }
    if constexpr (kBlockThreads < kSoftmaxMaxRowThreads) {
      // the next block size starts at 3 vectors: 2 would repeat this size's 4
      constexpr bool kLast = kVecs == 4 || kVecs == kMaxVecs;
      return launch_softmax_block_rows<Row, T, N, kLast ? kBlockThreads * 2 : kBlockThreads,
                                       kLast ? 3 : kVecs + 1>(dst, src, vecs, stream);
    } else {
      return launch_softmax_block_rows<Row, T, N, kBlockThreads, next_block_vecs(kVecs)>(
          dst, src, vecs, stream);
    }
  }
}

template <typename Row, typename T, int N, int kVecs>
cudaError_t launch_softmax_warp_rows(const SoftmaxDst<T>& dst, const typename Row::Params& src,
                                     int64_t vecs, cudaStream_t stream) {
  if constexpr (kVecs * N <= kSoftmaxRegFloats) {
    if (vecs <= int64_t(kWarpSize) * kVecs) {
      return launch_softmax_rows<Row, T, N, kWarpSize, kVecs, kSoftmaxWarpBlockThreads>(dst, src,
                                                                                       stream);
    }
    return launch_softmax_warp_rows<Row, T, N, kVecs * 2>(dst, src, vecs, stream);
  } else {
    return launch_softmax_block_rows<Row, T, N>(dst, src, vecs, stream);
  }
}

template <typename Row, typename T, int N>
cudaError_t launch_softmax_by_width(const SoftmaxDst<T>& dst, const typename Row::Params& src,
                                    cudaStream_t stream) {
  constexpr int kBlock = kSoftmaxWarpBlockThreads;
  const int64_t vecs = ceil_div<int64_t>(dst.cols, N);
  if (vecs <= 4) return launch_softmax_rows<Row, T, N, 4, 1, kBlock>(dst, src, stream);
  if (vecs <= 8) return launch_softmax_rows<Row, T, N, 8, 1, kBlock>(dst, src, stream);
  if (vecs <= 16) return launch_softmax_rows<Row, T, N, 16, 1, kBlock>(dst, src, stream);
  return launch_softmax_warp_rows<Row, T, N, 1>(dst, src, vecs, stream);
}

// Whether softmax_aligned_body_kernel takes these rows (16-bit values that 8-byte vectors do not
// fit: the caller checked): 65 to kBodyVecs x 256 columns (narrower rows keep the kernels with
// several rows a warp), x's and out's rows at the same offset mod 16 bytes.
template <typename T, int kBodyVecs = 1>
bool aligned_body_takes(const SoftmaxArgs<T>& a) {
  static_assert(sizeof(T) == 2, "the aligned body reads 16-bit rows");
  constexpr int kN = kVec128<T>;
  const auto offset = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16; };
  return a.cols >= 65 && a.cols <= kBodyVecs * kWarpSize * kN && offset(a.x) == offset(a.out) &&
         (a.rows <= 1 || (a.x_stride - a.cols) % kN == 0);
}

// softmax_aligned_body_kernel where it takes the rows (aligned_body_takes), else
// cudaErrorNotSupported.
template <typename T, int kBodyVecs = 1>
cudaError_t launch_softmax_aligned_body(const SoftmaxArgs<T>& a, cudaStream_t stream) {
  if (!aligned_body_takes<T, kBodyVecs>(a)) return cudaErrorNotSupported;
  constexpr int kRowsPerBlock = kSoftmaxWarpBlockThreads / kWarpSize;
  const int64_t tiles = ceil_div<int64_t>(a.rows, kRowsPerBlock);
  if (tiles > INT_MAX) return cudaErrorInvalidValue;  // launchers refuse >= 2^31 rows first
  const SoftmaxDst<T> dst{a.out, a.rows, a.cols, a.log_output};
  const dim3 grid(static_cast<unsigned>(tiles));
  if (a.log_output) {
    softmax_aligned_body_kernel<AlignedBodyRow<T>, T, true, kBodyVecs>
        <<<grid, kSoftmaxWarpBlockThreads, 0, stream>>>(dst, a);
  } else {
    softmax_aligned_body_kernel<AlignedBodyRow<T>, T, false, kBodyVecs>
        <<<grid, kSoftmaxWarpBlockThreads, 0, stream>>>(dst, a);
  }
  return cudaGetLastError();
}

// The widest vector of at most N elements that the rows allow (see the top of the file), or,
// for 16-bit rows that 8-byte vectors do not fit, the aligned body where it takes them.
template <typename T, int N = kVec128<T>>
cudaError_t launch_softmax(const SoftmaxArgs<T>& a, cudaStream_t stream) {
  if constexpr (sizeof(T) == 2 && N == 2) {
    const cudaError_t status = launch_softmax_aligned_body(a, stream);
    if (status != cudaErrorNotSupported) return status;
  }
  if constexpr (N > 1) {
    const bool fits = is_vec_aligned<T, N>(a.x) && is_vec_aligned<T, N>(a.out) &&
                      a.cols % N == 0 && (a.rows == 1 || a.x_stride % N == 0);
    if (!fits) return launch_softmax<T, N / 2>(a, stream);
  }
  const SoftmaxDst<T> dst{a.out, a.rows, a.cols, a.log_output};
  return launch_softmax_by_width<DenseRow<T, N>, T, N>(dst, a, stream);
}

// launch_softmax_padded's kernel for the rows of `a`, x's rows readable up to `readable_cols`
// values (past a.cols: the caller's promise, the last row's included: a padded buffer).
enum class PaddedRows {
  kRealignedHalves,  // PaddedDenseRow: 16-byte vectors both ways, out's rows on 8 bytes
  kRealignedWords,   // ... on 4 bytes
  kRealignedBytes,   // ... anywhere
  kAlignedBody2,     // unpadded rows of 257-512: the aligned body, two vectors a lane
  kUnpadded,         // launch_softmax, which does not read past a.cols
};

// 16-bit rows that 16-byte vectors do not fit as they are (a.cols or out's alignment), that a
// warp or a block holds in registers, are read whole through the padding (log_softmax only: the
// realigned kernels are instantiated for gemm_log_softmax's rows). Unpadded rows of 257 to 512
// that 8-byte vectors do not fit (an odd V's logits from cuBLAS) would take single elements in
// launch_softmax (DenseRow<T, 1>): the aligned body takes them with two vectors a lane instead
// (H200, fp16, V 257-511 at 64-1000 rows: 2.7-4.1 -> 1.8-2.1 µs; torch.log_softmax 2.2-2.8).
template <typename T>
PaddedRows padded_rows_kernel(const SoftmaxArgs<T>& a, int64_t readable_cols) {
  static_assert(sizeof(T) == 2, "16-bit rows");
  constexpr int N = kVec128<T>;
  const int64_t vecs = ceil_div<int64_t>(a.cols, N);
  constexpr int64_t kMaxVecs = int64_t(kSoftmaxMaxRowThreads) * kSoftmaxRegFloats / N;
  const bool realigned = a.log_output && !(a.cols % N == 0 && is_vec_aligned<T, N>(a.out)) &&
                         vecs > 16 && vecs <= kMaxVecs &&
                         vecs * N <= readable_cols && is_vec_aligned<T, N>(a.x) &&
                         (a.rows == 1 || a.x_stride % N == 0);
  if (realigned) {
    if (a.cols % N == N / 2 && is_vec_aligned<T, N / 2>(a.out)) return PaddedRows::kRealignedHalves;
    if (a.cols % 2 == 0 && is_vec_aligned<T, 2>(a.out)) return PaddedRows::kRealignedWords;
    return PaddedRows::kRealignedBytes;
  }
  constexpr int kQ = N / 2;  // elements of an 8-byte vector
  const bool quads = a.cols % kQ == 0 && is_vec_aligned<T, kQ>(a.x) &&
                     is_vec_aligned<T, kQ>(a.out) && (a.rows == 1 || a.x_stride % kQ == 0);
  if (a.log_output && !quads && a.cols > kWarpSize * N && aligned_body_takes<T, 2>(a)) {
    return PaddedRows::kAlignedBody2;
  }
  return PaddedRows::kUnpadded;
}

// The rows of `a` by the kernel padded_rows_kernel names.
template <typename T>
cudaError_t launch_softmax_padded(const SoftmaxArgs<T>& a, int64_t readable_cols,
                                  cudaStream_t stream) {
  constexpr int N = kVec128<T>;
  const int64_t vecs = ceil_div<int64_t>(a.cols, N);
  const SoftmaxDst<T> dst{a.out, a.rows, a.cols, a.log_output};
  switch (padded_rows_kernel(a, readable_cols)) {
    case PaddedRows::kRealignedHalves:
      return launch_softmax_warp_rows<PaddedDenseRow<T, N, N / 2>, T, N, 1>(dst, a, vecs, stream);
    case PaddedRows::kRealignedWords:
      return launch_softmax_warp_rows<PaddedDenseRow<T, N, 2>, T, N, 1>(dst, a, vecs, stream);
    case PaddedRows::kRealignedBytes:
      return launch_softmax_warp_rows<PaddedDenseRow<T, N, 1>, T, N, 1>(dst, a, vecs, stream);
    case PaddedRows::kAlignedBody2:
      return launch_softmax_aligned_body<T, 2>(a, stream);
    case PaddedRows::kUnpadded:
      break;
  }
  return launch_softmax(a, stream);
}

// Whether MaskedPairRow reads these operands: each present one unit-strided over Tk (an absent
// bias is read from the scores, so it must be no wider than them; it is of their type where
// absent). kAligned where also Tk is even and the rows of scores, out and the masks start on a
// pair of elements (a dim of extent 1 adds no offset, whatever its stride); the bias may start
// anywhere.
template <typename T, typename TBias>
bool masked_rows_unit_steps(const MaskedSoftmaxArgs<T, TBias>& a) {
  return (a.bias ? a.bias_stride[3] == 1 : sizeof(TBias) <= sizeof(T)) &&
         (!a.mask || a.mask_stride[3] == 1) && (!a.key_padding_mask || a.kpm_stride[1] == 1);
}

template <typename T, typename TBias>
bool masked_rows_pair_aligned(const MaskedSoftmaxArgs<T, TBias>& a) {
  const int64_t extents[3] = {a.batch, a.heads, a.q_len};
  const auto pairs = [&](const void* ptr, size_t elem, const int64_t* strides, int dims) {
    if (ptr == nullptr) return true;
    bool ok = reinterpret_cast<uintptr_t>(ptr) % (2 * elem) == 0;
    for (int d = 0; d < dims; ++d) ok = ok && (extents[d] == 1 || strides[d] % 2 == 0);
    return ok;
  };
  const int64_t kpm_strides[1] = {a.kpm_stride[0]};
  return a.k_len % 2 == 0 && is_vec_aligned<T, 2>(a.out) &&
         pairs(a.scores, sizeof(T), a.scores_stride, 3) && pairs(a.mask, 1, a.mask_stride, 3) &&
         pairs(a.key_padding_mask, 1, kpm_strides, 1);
}

// The masked rows of `a` through row source Row, N values a load.
template <typename Row, int N, typename T, typename TBias>
cudaError_t launch_masked_rows(const MaskedSoftmaxArgs<T, TBias>& a, cudaStream_t stream) {
  const int64_t rows = a.batch * a.heads * a.q_len;
  const SoftmaxDst<T> dst{a.out, rows, a.k_len, false};
  const MaskedRowParams<T, TBias> src{a, IndexDivmod(a.q_len, rows - 1),
                                      IndexDivmod(a.heads, a.batch * a.heads - 1)};
  return launch_softmax_by_width<Row, T, N>(dst, src, stream);
}

template <typename T, bool kBiasVectors, bool kPadding>
cudaError_t launch_masked_aligned_body_rows(const MaskedSoftmaxArgs<T, T>& a, cudaStream_t stream) {
  const int64_t rows = a.batch * a.heads * a.q_len;
  constexpr int kRowsPerBlock = kSoftmaxWarpBlockThreads / kWarpSize;
  const int64_t tiles = ceil_div<int64_t>(rows, kRowsPerBlock);
  if (tiles > INT_MAX) return cudaErrorInvalidValue;  // launchers refuse >= 2^31 rows first
  const SoftmaxDst<T> dst{a.out, rows, a.k_len, false};
  const MaskedRowParams<T, T> src{a, IndexDivmod(a.q_len, rows - 1),
                                  IndexDivmod(a.heads, a.batch * a.heads - 1)};
  softmax_aligned_body_kernel<MaskedAlignedBodyRow<T, kBiasVectors, kPadding>, T, false>
      <<<static_cast<unsigned>(tiles), kSoftmaxWarpBlockThreads, 0, stream>>>(dst, src);
  return cudaGetLastError();
}

// How the aligned-body kernel reads masked rows, or kNone where it does not take them.
enum class MaskedAlignedBody { kNone, kBiasVectors, kBiasElements };

// The aligned-body kernel takes masked rows with 16-bit scores and bias, no general mask, every
// operand unit-strided over Tk, 65 to 256 keys, fewer than 2^31 rows and every element read at
// an offset below 2^31, and the rows of the scores at the offset mod 16 bytes of out's
// (contiguous) rows: the same base offset, and over B, H and Tq strides that differ from out's
// by whole vectors (a dim of extent 1 adds no offset). The bias is read as vectors where its rows
// sit at the scores' offsets in the same sense (or there is none), else by element. Host code.
template <typename T, typename TBias>
MaskedAlignedBody masked_aligned_body(const MaskedSoftmaxArgs<T, TBias>& a) {
  if constexpr (sizeof(T) != 2 || !std::is_same_v<T, TBias>) {
    return MaskedAlignedBody::kNone;
  } else {
    constexpr int kN = kVec128<T>;
    const int64_t extents[3] = {a.batch, a.heads, a.q_len};
    const int64_t out_strides[3] = {a.heads * a.q_len * a.k_len, a.q_len * a.k_len, a.k_len};
    const auto congruent = [&](const T* p, const int64_t* p_strides, const T* q,
                               const int64_t* q_strides) {
      bool ok = reinterpret_cast<uintptr_t>(p) % 16 == reinterpret_cast<uintptr_t>(q) % 16;
      for (int d = 0; d < 3; ++d) {
        ok = ok && (extents[d] == 1 || (p_strides[d] - q_strides[d]) % kN == 0);
      }
      return ok;
    };
    // The largest element offset an operand is read at, or -1 with a negative stride.
    const auto last = [&](const int64_t* strides, int dims) {
      int64_t offset = a.k_len - 1;
      for (int d = 0; d < dims; ++d) {
        if (strides[d] < 0) return int64_t(-1);
        offset += (extents[d] - 1) * strides[d];
      }
      return offset;
    };
    const auto fits = [](int64_t offset) { return offset >= 0 && offset < (int64_t(1) << 31); };
    const int64_t kpm_strides[1] = {a.kpm_stride[0]};
    if (a.mask != nullptr || a.k_len < 65 || a.k_len > kWarpSize * kN ||
        !masked_rows_unit_steps(a) || !congruent(a.scores, a.scores_stride, a.out, out_strides) ||
        !fits(a.batch * a.heads * a.q_len) || !fits(last(a.scores_stride, 3)) ||
        (a.bias && !fits(last(a.bias_stride, 3))) ||
        (a.key_padding_mask && !fits(last(kpm_strides, 1)))) {
      return MaskedAlignedBody::kNone;
    }
    return a.bias == nullptr || congruent(a.bias, a.bias_stride, a.scores, a.scores_stride)
               ? MaskedAlignedBody::kBiasVectors
               : MaskedAlignedBody::kBiasElements;
  }
}

// The aligned-body kernel for masked rows where masked_aligned_body takes them;
// cudaErrorNotSupported where not.
template <typename T, typename TBias>
cudaError_t launch_masked_aligned_body(const MaskedSoftmaxArgs<T, TBias>& a, cudaStream_t stream) {
  if constexpr (sizeof(T) != 2 || !std::is_same_v<T, TBias>) {
    return cudaErrorNotSupported;
  } else {
    const MaskedAlignedBody path = masked_aligned_body(a);
    if (path == MaskedAlignedBody::kNone) return cudaErrorNotSupported;
    const bool padding = a.key_padding_mask != nullptr;
    if (path == MaskedAlignedBody::kBiasVectors) {
      return padding ? launch_masked_aligned_body_rows<T, true, true>(a, stream)
                     : launch_masked_aligned_body_rows<T, true, false>(a, stream);
    }
    return padding ? launch_masked_aligned_body_rows<T, false, true>(a, stream)
                   : launch_masked_aligned_body_rows<T, false, false>(a, stream);
  }
}

template <typename T, typename TBias>
cudaError_t launch_masked_softmax(const MaskedSoftmaxArgs<T, TBias>& a, cudaStream_t stream) {
  const cudaError_t status = launch_masked_aligned_body(a, stream);
  if (status != cudaErrorNotSupported) return status;
  if (masked_rows_unit_steps(a)) {
    if (masked_rows_pair_aligned(a)) {
      return launch_masked_rows<MaskedPairRow<T, TBias, true>, 2>(a, stream);
    }
    return launch_masked_rows<MaskedPairRow<T, TBias, false>, 2>(a, stream);
  }
  return launch_masked_rows<MaskedRow<T, TBias>, 1>(a, stream);
}

}  // namespace oasr
