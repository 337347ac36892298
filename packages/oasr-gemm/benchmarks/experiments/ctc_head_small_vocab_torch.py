"""The peers of ctc_head_small_vocab.cu on the same shapes and timing (16 rotating A inputs, CUDA
events, 200 calls): PyTorch's F.log_softmax(F.linear(A, B, bias)) and oasr_gemm.gemm_log_softmax.

    python ctc_head_small_vocab_torch.py [M K V]   (default 8000 256 500)
"""

import sys

import torch
import torch.nn.functional as F

import oasr_gemm

M, K, V = (int(v) for v in sys.argv[1:4]) if len(sys.argv) > 3 else (8000, 256, 500)
A = [torch.rand(M, K, device="cuda").mul(2).sub(1).half() for _ in range(16)]
B = torch.rand(V, K, device="cuda").mul(2).sub(1).mul(3 / K**0.5).half()
bias = torch.rand(V, device="cuda").mul(2).sub(1).half()


def time_us(fn, reps=200):
    for i in range(20):
        fn(A[i % len(A)])
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for i in range(reps):
        fn(A[i % len(A)])
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) * 1e3 / reps


def torch_head(x):
    return F.log_softmax(F.linear(x, B, bias), dim=-1)


def oasr_head(x):
    return oasr_gemm.gemm_log_softmax(x, B, bias)


want = torch_head(A[0]).float()
err = (oasr_head(A[0]).float() - want).abs().max().item()
print(f"M {M} K {K} V {V}: oasr vs torch max |difference| {err:.3g}")
for name, fn in (
    ("torch F.log_softmax(F.linear)", torch_head),
    ("oasr gemm_log_softmax", oasr_head),
):
    print(f"{name}: {time_us(fn):.2f} us")
