// Host side of the softmax kernels (oasr/common/softmax.cuh): the kernel whose capacity first
// covers the row, and the vector width it reads.
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
// 8-byte vectors rather than single elements (single elements are 2.1x slower than torch at
// 1500). Rows of 65 to 256 16-bit values that 8-byte vectors do not fit either, whose x and out
// rows sit at the same offset mod 16 bytes, are read instead as an aligned body of 16-byte
// vectors plus the few values before and after it (softmax_aligned_body_kernel; gemm_log_softmax's
// row pass takes it up to 512 values, two vectors a lane). Where the caller can promise that x's
// rows are readable past their end (launch_softmax_padded), 16-bit rows of any width and
// alignment keep 16-byte vectors both ways: PaddedDenseRow.
#pragma once

#include <climits>

#include "oasr/common/softmax/kernels.cuh"

namespace oasr {

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
// at 2.2 TB/s with 8 slots per thread of which 3 were used and at 4.2 TB/s with exactly 3. A
// shape no wider than the one before it is never chosen, so it is not instantiated.
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

}  // namespace oasr
