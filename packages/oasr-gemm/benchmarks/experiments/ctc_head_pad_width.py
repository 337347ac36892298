"""How wide gemm_log_softmax's padded GEMM should be at an odd vocabulary (session 26).

cuBLAS's addmm into logits padded to a multiple of 8 columns against a multiple of 32 (the weight
and bias padded alike), CUDA events around one call, median of 30. On the H200 (fp16 / bf16,
µs, x8 → x32): 8000 × 8404 × 512 143.6 → 135.6 / 143.7 → 133.9; 32000 × 5001 × 256 204.7 →
174.5; 1.06-1.18x at V 8404 and 10001 at every M, and at V 5001 from 32000 rows; V 2047 and 3001
within 3% either way; V 1025 up to 7% slower (8000 × 1025 × 256: 30.4 → 32.8). Hence
`oasr_gemm.head.PAD_WIDE_VOCAB`.
Run: python packages/oasr-gemm/benchmarks/experiments/ctc_head_pad_width.py
"""

import torch
import torch.nn.functional as F
from event_timing import median_us


def main() -> None:
    for dtype in (torch.float16, torch.bfloat16):
        for M in (2000, 8000, 32000):
            for K in (256, 512):
                for V in (1025, 2047, 3001, 5001, 8404, 10001):
                    a = torch.randn(M, K, device="cuda", dtype=dtype)
                    b = (torch.randn(V, K, device="cuda") / K**0.5).to(dtype)
                    c = torch.randn(V, device="cuda", dtype=dtype)
                    times = []
                    for multiple in (8, 32):
                        W = -(-V // multiple) * multiple
                        b_pad, c_pad = F.pad(b, (0, 0, 0, W - V)), F.pad(c, (0, W - V))
                        logits = torch.empty(M, W, device="cuda", dtype=dtype)
                        args = (c_pad, a, b_pad.t())
                        times.append(
                            median_us(lambda args=args, out=logits: torch.addmm(*args, out=out))
                        )
                    print(
                        f"{dtype} {M}x{V}x{K}: x8 {times[0]:.1f} x32 {times[1]:.1f} µs, "
                        f"{times[0] / times[1]:.3f}x",
                        flush=True,
                    )


if __name__ == "__main__":
    main()
