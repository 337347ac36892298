"""PyTorch's activations on activation_launch.cu's shapes, timed the same way: 4 rotating
buffers, the median of 9 batches of 20 calls."""

import torch
import torch.nn.functional as F

OPS = {
    "relu": torch.relu,
    "sigmoid": torch.sigmoid,
    "swish": F.silu,
    "gelu": F.gelu,
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "tanh": torch.tanh,
}


def median_us(fn, xs, batch=20):
    for i in range(8):
        fn(xs[i % len(xs)])
    samples = []
    for _ in range(9):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for i in range(batch):
            fn(xs[i % len(xs)])
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) * 1000 / batch)
    return sorted(samples)[len(samples) // 2]


for rows, cols in ((8000, 2048), (32000, 5120)):
    for dtype, dname in ((torch.float16, "fp16"), (torch.bfloat16, "bf16")):
        xs = [torch.randn(rows, cols, device="cuda", dtype=dtype) for _ in range(4)]
        for name, fn in OPS.items():
            us = median_us(fn, xs)
            gbps = 4 * rows * cols / us / 1e3
            shape = f"{rows:6d}x{cols:<5d}"
            print(f"{name:10s} {dname} {shape} {'PyTorch':28s} {us:8.2f} us {gbps:6.0f} GB/s")
        del xs
