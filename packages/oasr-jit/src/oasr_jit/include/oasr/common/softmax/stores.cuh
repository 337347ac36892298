// How the softmax kernels write a row (oasr/common/softmax.cuh): whole N-value vectors, element
// by element up to the row's end, or, for 16-bit rows whose out rows start off a 16-byte boundary
// (gemm_log_softmax at an odd vocabulary), 16-byte vectors realigned across the lanes of a warp.
#pragma once

#include "oasr/common/softmax/rows.cuh"

namespace oasr {

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

}  // namespace oasr
