"""The CTC-head experiments' timer: one eager call between CUDA events, the median of ``reps``
after three warm-up calls. A call of several launches includes the host's time between them."""

import statistics

import torch


def median_us(fn, reps: int = 30) -> float:
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3)
    return statistics.median(times)
