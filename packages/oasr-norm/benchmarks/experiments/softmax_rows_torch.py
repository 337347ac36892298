"""torch.softmax / log_softmax on softmax_rows.cu's rows, timed the same way: 3 rotating buffers,
the median of 7 batches."""

import torch

ROWS = ((64000, 250, False), (480000, 1500, False), (8000, 5000, True), (8000, 500, True))


def median_us(fn, xs, batch):
    for i in range(6):
        fn(xs[i % len(xs)])
    samples = []
    for _ in range(7):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for i in range(batch):
            fn(xs[i % len(xs)])
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) * 1000 / batch)
    return sorted(samples)[len(samples) // 2]


for rows, cols, log in ROWS:
    op = "log_softmax" if log else "softmax"
    fn = getattr(torch, op)
    for dtype, dname in ((torch.float16, "fp16"), (torch.bfloat16, "bf16")):
        xs = [torch.randn(rows, cols, device="cuda", dtype=dtype) for _ in range(3)]
        us = median_us(lambda x, fn=fn: fn(x, -1), xs, 3 if rows * cols > 100_000_000 else 20)
        gbps = 4 * rows * cols / us / 1e3
        print(f"{op} {dname} {rows:6d}x{cols:<5d} {'PyTorch':22s} {us:9.2f} us {gbps:6.0f} GB/s")
        del xs
