"""CPU check of `ctc_head_staging.patch` (session 28, not yet run on a GPU): the one-kernel head
staging its log-probabilities in rows of `stride` = V + (8 - V) mod 16 elements instead of V,
and each warp copying a row out as a head of single elements, 16-byte vectors realigned from the
staged row (whole words for an even head, byte permutes for an odd one) and a tail.

1. The copy-out reproduces every row, for every V 1..512 and every alignment of the row in out
   (emulated on uint16 words, little-endian like the GPU).
2. The bank conflicts of the staging stores (a warp covers 8 rows x 4 lanes of 4-byte pairs):
   the most distinct words a bank serves in one store, rows of V elements against rows of
   `stride`. V / 2 words a multiple of 32 (V 128, 256, 384, 512) is 8-way with rows of V.

    python packages/oasr-gemm/benchmarks/experiments/ctc_head_staging_check.py
"""

from __future__ import annotations

from collections import Counter

import numpy as np


def staged_stride(V: int) -> int:
    return V + ((8 - V) & 15)


def window(lo: np.ndarray, hi: np.ndarray, head: int) -> np.ndarray:
    """elements head..head+7 of lo:hi, as the patch's copy_realigned<head> forms them"""
    w = np.concatenate([lo, hi]).view(np.uint32)
    q = head // 2
    out = []
    for k in range(4):
        x, y = int(w[q + k]), int(w[q + k + 1])
        out.append(((x >> 16) | ((y & 0xFFFF) << 16)) if head % 2 else x)  # __byte_perm 0x5432
    return np.array(out, dtype=np.uint32).view(np.uint16)


def copy_row(src: np.ndarray, V: int, offset: int) -> np.ndarray:
    """out's row (whose first element sits `offset` elements past a 16-byte boundary)"""
    out = np.zeros(V, dtype=np.uint16)
    head = min((8 - offset) % 8, V)
    vectors = (V - head) // 8
    out[:head] = src[:head]
    for v in range(vectors):
        lo = src[8 * v : 8 * v + 8]
        hi = src[8 * v + 8 : 8 * v + 16] if head else lo
        out[head + 8 * v : head + 8 * v + 8] = window(lo, hi, head)
    out[head + 8 * vectors :] = src[head + 8 * vectors : V]
    return out


def worst_conflict(stride: int) -> int:
    worst = 0
    for block in range(64):  # 8-column blocks of a row
        for first_row in (0, 8):
            words = {
                ((first_row + lane // 4) * stride + 8 * block + 2 * (lane % 4)) // 2
                for lane in range(32)
            }
            worst = max(worst, max(Counter(word % 32 for word in words).values()))
    return worst


def main() -> None:
    rng = np.random.default_rng(0)
    for V in range(1, 513):
        stride = staged_stride(V)
        assert stride % 16 == 8 and V <= stride and (V % 2 == 0 or V < stride)
        rows = rng.integers(0, 1 << 16, size=(2, V), dtype=np.uint16)
        for row in rows:
            src = np.full(stride + 16, 0xDEAD, dtype=np.uint16)  # the padding and what follows
            src[:V] = row
            for offset in range(8):
                assert np.array_equal(copy_row(src, V, offset), row), (V, offset)
    print("copy-out: every row of V 1..512 at every alignment reproduced")
    print("V: worst bank conflict of a staging store, rows of V -> rows of stride")
    for V in (33, 100, 128, 255, 256, 300, 383, 384, 500, 511, 512):
        print(f"  {V}: {worst_conflict(V)}-way -> {worst_conflict(staged_stride(V))}-way")


if __name__ == "__main__":
    main()
