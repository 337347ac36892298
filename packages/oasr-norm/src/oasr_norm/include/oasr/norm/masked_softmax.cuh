// The norm family's masked attention softmax: the softmax of z = scale * scores + bias over the
// positions a row keeps (mask true and key_padding_mask false; the others are z = -inf, output
// 0). A row with no finite z is all zeros, never NaN. Its row sources (MaskedRow, MaskedPairRow,
// MaskedAlignedBodyRow) run the shared softmax kernels of oasr/common/softmax.cuh.
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
#include "oasr/common/softmax.cuh"

namespace oasr {

// ---------------------------------------------------------------------------------------------
// Row sources (oasr/common/softmax/rows.cuh) of the masked rows.

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
// On the H200 at 32 x 4 x 250 x 250 with a key padding mask, against MaskedRow, which is bound
// by its ~94 instructions a value: kAligned, a dense bias 32.1 -> 19.4 us, a window 29.2 ->
// 17.8; by element at 249 keys 32.1 -> 24.8. The bias as one word where it is aligned would be
// 1-10% faster for a dense bias (1% at 250 keys, 6-10% at 500), but a branch on it costs as much.
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

// masked_softmax rows without a general mask (a bias and a key padding mask: Zipformer's and
// Conformer's self-attention). The bias's body is 16-byte vectors too where the launcher proved
// its rows at the scores' offset mod 16 bytes (kBiasVectors: a dense bias, or none, read from
// the scores and zeroed), else an element at a time (a relative-position window, whose rows
// start one element apart; its table is a few KB, so these loads hit L1); the key padding mask
// a byte at a time (every row of a batch entry reads the same one).
// The launcher checked that rows and every operand's offsets fit in 31 bits, so the row's
// (b, h, q) and offsets are 32-bit arithmetic: a warp per row pays them per row, and the kernel
// is bound by instruction issue (ncu at 32 x 4 x 250 x 250: issue slots ~75% busy, DRAM at 45%;
// 289 instructions a row, against 354 with 64-bit offsets).
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

// ---------------------------------------------------------------------------------------------
// Host side: the row source and kernel the operands' layout allows.

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
