"""Softmax time by key count at a fixed 32 MB of fp16 input (64000 x 250 and its neighbours):
whether a row's alignment (250 halves = 500-byte rows, 4-byte aligned; 248 and 256 = whole
16-byte vectors; 500 = 8-byte aligned) sets the kernel's share of copy bandwidth. Four inputs
rotated, the calls queued behind a sleep kernel, CUDA events; tanh on the same bytes for scale.
Under ncu (``ncu --clock-control none --profile-from-start off --set full python
softmax_keys.py profile``) it profiles one call of each: oasr softmax, torch.softmax, oasr tanh.
``python softmax_keys.py align`` times rows whose starts are 512-byte aligned (session 16)."""

import sys

import torch

import oasr_norm

COPY_GBPS = 4270


def time_us(fn, reps=50):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    fn()
    torch.cuda.synchronize()
    torch.cuda._sleep(2_000_000)
    start.record()
    for _ in range(reps):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / reps * 1e3


def rotating(op, xs):
    state = {"i": 0}

    def call():
        state["i"] += 1
        op(xs[state["i"] % len(xs)])

    return call


def aligned_rows(rows, keys, stride):
    """[rows, keys] views of a [rows, stride] buffer: every row starts 2 * stride bytes apart."""
    return torch.randn(rows, stride, device="cuda").half()[:, :keys]


if len(sys.argv) > 1 and sys.argv[1] == "align":
    # Session 16: the same kernel shape on rows whose start is 512-byte aligned (a stride of 256
    # halves) against contiguous rows.
    for keys, stride in ((250, 250), (250, 256), (248, 248), (248, 256), (252, 252), (256, 256)):
        rows = 64000 * 250 // keys
        xs = [aligned_rows(rows, keys, stride) for _ in range(4)]
        us = time_us(rotating(oasr_norm.softmax, xs))
        share = 2 * rows * keys * 2 / us / 1e3 / COPY_GBPS
        print(f"softmax fp16 {rows}x{keys} (row stride {stride}): {us:.1f} us, {share:.0%} of copy")
elif len(sys.argv) > 1 and sys.argv[1] == "profile":
    x = torch.randn(32, 8, 250, 250, device="cuda").half()
    a = torch.randn(8000, 2048, device="cuda").half()
    for _ in range(2):
        oasr_norm.softmax(x), torch.softmax(x, -1), oasr_norm.tanh(a)
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    oasr_norm.softmax(x), torch.softmax(x, -1), oasr_norm.tanh(a)
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()
else:
    for keys in (250, 249, 256, 248, 240, 252, 500, 512):
        rows = 64000 * 250 // keys
        xs = [torch.randn(rows, keys, device="cuda").half() for _ in range(4)]
        us = time_us(rotating(oasr_norm.softmax, xs))
        gbps = 2 * rows * keys * 2 / us / 1e3
        print(f"softmax fp16 {rows}x{keys}: {us:.1f} us, {gbps / COPY_GBPS:.0%} of copy")
    xs = [torch.randn(8000, 2048, device="cuda").half() for _ in range(4)]
    us = time_us(rotating(oasr_norm.tanh, xs))
    share = 2 * 8000 * 2048 * 2 / us / 1e3 / COPY_GBPS
    print(f"tanh fp16 8000x2048: {us:.1f} us, {share:.0%} of copy")
