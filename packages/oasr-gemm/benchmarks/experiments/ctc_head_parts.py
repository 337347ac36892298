"""Where gemm_log_softmax's two passes spend their time at V 5000 and 8404 (sessions 24, 26).

Each part is timed alone with CUDA events around an eager call, median of 30, 8000 rows, K 512:
the whole op, PyTorch's linear and log_softmax, the weight padding, the padded GEMM (cuBLAS into
all W columns, into only the V columns of the padded buffer, and OASR's `gemm` on the padded
operands), and the row pass from the padded logits (as a V-column view, and whole: 16-byte
vectors, `PaddedDenseRow`), in place, and over aligned rows of the padded width. Calls of
several launches (the whole op, the padding) include the host's time between launches; single
launches (the row pass) are the GPU's. On the H200 (fp16 / bf16, µs) at V 8404: the row pass
from the V-column view 94.2 / 93.5, whole 83.8 / 83.2, in place 94.2 / 93.3, over aligned rows
of 8408 80.9 / 80.7; cuBLAS into the V columns 508-526, into all 8408 140-145; at V 5000 47-51
either way. Run: python packages/oasr-gemm/benchmarks/experiments/ctc_head_parts.py [V ...]
"""

import sys

import torch
import torch.nn.functional as F
from event_timing import median_us

import oasr_gemm
from oasr_gemm import head

M, K = 8000, 512
COPY_TBPS = 4.27


def time_parts(a: torch.Tensor, vocab: int) -> None:
    rows = head._row_pass()
    dtype = a.dtype
    b = (torch.randn(vocab, K, device="cuda") / K**0.5 * 4).to(dtype)
    c = torch.randn(vocab, device="cuda", dtype=dtype)
    padded = -(-vocab // 8) * 8
    b_pad = F.pad(b, (0, 0, 0, padded - vocab))
    c_pad = F.pad(c, (0, padded - vocab))
    logits = torch.empty(M, padded, device="cuda", dtype=dtype)
    out = torch.empty(M, vocab, device="cuda", dtype=dtype)
    linear = F.linear(a, b, c)
    x_aligned = torch.randn(M, padded, device="cuda", dtype=dtype)
    out_aligned = torch.empty_like(x_aligned)
    parts = {
        "op": lambda: oasr_gemm.gemm_log_softmax(a, b, c, out=out),
        "torch": lambda: F.log_softmax(F.linear(a, b, c), dim=-1),
        "torch linear": lambda: F.linear(a, b, c),
        "torch log_softmax": lambda: F.log_softmax(linear, dim=-1),
        "pad weight and bias": lambda: (
            F.pad(b, (0, 0, 0, padded - vocab)),
            F.pad(c, (0, padded - vocab)),
        ),
        "addmm into padded": lambda: torch.addmm(c_pad, a, b_pad.t(), out=logits),
        "addmm into padded, V columns": lambda: torch.addmm(c, a, b.t(), out=logits[:, :vocab]),
        "gemm into padded": lambda: oasr_gemm.gemm(a, b_pad, c_pad, out=logits),
        "gemm into padded, forced": lambda: oasr_gemm.gemm(
            a, b_pad, c_pad, out=logits, backend="oasr"
        ),
        "rows from padded, V-column view": lambda: rows(out, logits[:, :vocab]),
        "rows from padded": lambda: rows(out, logits),
        "rows in place": lambda: rows(out, out),
        f"rows aligned x{padded}": lambda: rows(out_aligned, x_aligned),
    }
    # the variants agree: the strided addmm writes in place; both row passes match PyTorch
    torch.addmm(c_pad, a, b_pad.t(), out=logits)
    want = F.log_softmax(logits[:, :vocab].float(), dim=-1)
    view = logits[:, :vocab]
    torch.addmm(c, a, b.t(), out=view)
    assert view.data_ptr() == logits.data_ptr() and view.stride() == (padded, 1)
    for source in (logits[:, :vocab], logits):
        out.fill_(float("nan"))
        rows(out, source)
        tol = 1e-2 if dtype == torch.float16 else 1e-1
        torch.testing.assert_close(out.float(), want, rtol=tol, atol=tol)
    times = {name: median_us(fn) for name, fn in parts.items()}
    floor_us = 2 * M * vocab * out.element_size() / (COPY_TBPS * 1e6)
    print(
        f"{dtype} {M}x{vocab}x{K}: "
        + ", ".join(f"{name} {us:.1f}" for name, us in times.items())
        + f" (µs; the row pass's bytes at {COPY_TBPS} TB/s: {floor_us:.1f})"
    )


def main() -> None:
    vocabs = [int(v) for v in sys.argv[1:]] or [5000, 8404, 2047, 1025]
    for dtype in (torch.float16, torch.bfloat16):
        a = torch.randn(M, K, device="cuda", dtype=dtype)
        for vocab in vocabs:
            time_parts(a, vocab)


if __name__ == "__main__":
    main()
