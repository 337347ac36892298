"""What the fused CTC heads' GPU tests share: seeded operands whose logits are a few units, the
float64 reference from the logits rounded to the dtype, its tolerances, and a call replayed from
a CUDA graph."""

from __future__ import annotations

import torch

# (rtol, atol): the output's rounding (half an ulp: 2^-11 |y| fp16, 2^-8 |y| bf16), and a logit
# near a rounding boundary may round the other way from the fp32 sum than from the exact one (an
# ulp of a logit below 16: 0.008 fp16, 0.06 bf16)
TOLERANCES = {torch.float16: (1e-3, 1e-2), torch.bfloat16: (8e-3, 7e-2)}


def randn(*shape, dtype, seed=0, scale=1.0):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    return (torch.randn(*shape, device="cuda", generator=gen) * scale).to(dtype)


def head_operands(M, K, V, dtype, bias=True, seed=0):
    A = randn(M, K, dtype=dtype, seed=seed)
    B = randn(V, K, dtype=dtype, seed=seed + 1, scale=3 * K**-0.5)  # logits of a few units
    C = randn(V, dtype=dtype, seed=seed + 2) if bias else None
    return A, B, C


def reference(A, B, C):
    """float64, from the logits rounded to A's dtype (what the op and PyTorch see)"""
    logits = A.double() @ B.double().T
    if C is not None:
        logits += C.double()
    return torch.log_softmax(logits.to(A.dtype).double(), dim=-1)


def assert_matches_reference(out, A, B, C):
    rtol, atol = TOLERANCES[out.dtype]
    torch.testing.assert_close(out.double(), reference(A, B, C), rtol=rtol, atol=atol)


def replay_in_graph(call, out):
    """Runs `call` (which writes `out`) once eagerly (builds and loads outside the capture),
    captures it on a side stream, poisons `out` and replays the graph."""
    call()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=side):
        call()
    out.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
