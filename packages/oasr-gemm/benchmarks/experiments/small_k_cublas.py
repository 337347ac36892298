"""cuBLAS (torch.mm, and F.linear + F.silu) on small_k.cu's shapes, timed the same way: the best
of 5 batches of 20 calls. Inputs are random here and constant in small_k.cu."""

import torch
import torch.nn.functional as F

SHAPES = (
    (8000, 2048, 256),
    (8000, 768, 256),
    (8000, 5000, 256),
    (32000, 2048, 512),
    (32000, 1536, 512),
)


def best_us(fn, batch=20):
    for _ in range(5):
        fn()
    best = float("inf")
    for _ in range(5):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(batch):
            fn()
        end.record()
        end.synchronize()
        best = min(best, start.elapsed_time(end) * 1000 / batch)
    return best


for m, n, k in SHAPES:
    a = torch.randn(m, k, device="cuda", dtype=torch.float16)
    b = torch.randn(n, k, device="cuda", dtype=torch.float16)
    bias = torch.randn(n, device="cuda", dtype=torch.float16)
    d = torch.empty(m, n, device="cuda", dtype=torch.float16)
    sides = {
        "plain": lambda a=a, b=b, d=d: torch.mm(a, b.t(), out=d),
        "bias+silu": lambda a=a, b=b, bias=bias: F.silu(F.linear(a, b, bias)),
    }
    for name, fn in sides.items():
        us = best_us(fn)
        tflops = 2 * m * n * k / us / 1e6
        shape = f"{m:6d}x{n:5d}x{k:4d}"
        print(f"{'cuBLAS / PyTorch':36s} {shape}  {name:9s} {us:8.2f} us ({tflops:5.0f} TFLOP/s)")
