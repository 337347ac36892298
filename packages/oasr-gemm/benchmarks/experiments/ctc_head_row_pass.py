"""gemm_log_softmax's row pass from the padded logits, by vocabulary (session 26).

The row pass alone (`oasr_gemm.head._row_pass`) over 8000 rows of logits padded as the op pads
them (to 8 columns, to 32 past V 4096), one eager call between CUDA events, median of 30, each
output checked against float32 `log_softmax`. With ``--rule``, also the cluster head against the
two passes (forced, eager calls, so small calls include the host's time) at the cluster rule's
shapes. On the H200, fp16 µs (bf16 within 2%), before (c41d1e1: halves only) → after
(`store_realigned`): V 10001 324.0 → 132.1, 8402 176.7 → 115.8, 5001 122.8 → 67.7, 4233 107.9 →
60.8, 3001 64.2 → 39.2, 2047 45.2 → 28.4, 1025 33.0 → 23.2; V 8404 and 1028 (halves) 84.1 / 18.2
either way. Run: python packages/oasr-gemm/benchmarks/experiments/ctc_head_row_pass.py [--rule]
"""

import sys

import torch
import torch.nn.functional as F
from event_timing import median_us

from oasr_gemm import head

M = 8000
VOCABS = (8404, 10001, 5001, 4233, 3001, 2047, 1025, 1028, 8402)
RULE_SHAPES = (
    (8000, 1025, 256),
    (32000, 1025, 256),
    (4000, 2047, 256),
    (8000, 3001, 256),
    (32000, 3001, 256),
    (2000, 1025, 512),
    (8000, 1025, 512),
    (32000, 1025, 512),
)


def row_pass(dtype: torch.dtype) -> None:
    rows = head._row_pass()
    line = []
    for V in VOCABS:
        logits = (torch.randn(M, head.padded_vocab(V), device="cuda") * 4).to(dtype)
        out = torch.full((M, V), float("nan"), device="cuda", dtype=dtype)
        rows(out, logits)
        want = torch.log_softmax(logits[:, :V].float(), dim=-1)
        tol = 1e-2 if dtype == torch.float16 else 1e-1
        torch.testing.assert_close(out.float(), want, rtol=tol, atol=tol)
        line.append(f"V {V} {median_us(lambda out=out, logits=logits: rows(out, logits)):.1f}")
    print(f"{dtype} {M} rows: " + ", ".join(line) + " µs", flush=True)


def rule() -> None:
    for rows_, V, K in RULE_SHAPES:
        a = torch.randn(rows_, K, device="cuda").half()
        b = (torch.randn(V, K, device="cuda") / K**0.5 * 4).half()
        c = torch.randn(V, device="cuda").half()
        out = torch.empty(rows_, V, device="cuda", dtype=torch.float16)
        args = (a, b, c)
        cluster = median_us(lambda args=args, out=out: head._cluster_head()(out, *args, 0))
        saved, head.cluster_head_wins = head.cluster_head_wins, lambda *_: False
        two_passes = median_us(lambda args=args, out=out: head.gemm_log_softmax(*args, out=out))
        head.cluster_head_wins = saved
        torch_us = median_us(lambda args=args: F.log_softmax(F.linear(*args), dim=-1))
        print(
            f"{rows_}x{V}x{K}: cluster head {cluster:.1f}, two passes {two_passes:.1f}, "
            f"PyTorch {torch_us:.1f} µs",
            flush=True,
        )


if __name__ == "__main__":
    for dtype in (torch.float16, torch.bfloat16):
        row_pass(dtype)
    if "--rule" in sys.argv:
        rule()
