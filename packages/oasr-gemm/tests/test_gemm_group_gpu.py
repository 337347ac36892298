"""`group_gemm` on the GPU against an fp32 reference: ragged groups (empty ones too), one group,
many groups, fp16 and bf16, ``out=``; invalid offsets without the host check (no fault, the
valid groups right); alignment refusals; CUDA-graph capture."""

from __future__ import annotations

import itertools

import pytest
import torch

import oasr_gemm
from oasr_jit.testing import skip_unless_gpu

pytestmark = skip_unless_gpu()


def _inputs(rows, N, K, dtype, seed=0):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    A = torch.randn(sum(rows), K, device="cuda", generator=gen).to(dtype)
    B = (torch.randn(len(rows), N, K, device="cuda", generator=gen) / K**0.5).to(dtype)
    bounds = [0, *torch.tensor(rows).cumsum(0).tolist()]
    return A, B, torch.tensor(bounds, dtype=torch.int32, device="cuda"), bounds


def _ref(A, B, bounds):
    return torch.cat(
        [A[lo:hi].float() @ B[g].float().T for g, (lo, hi) in enumerate(itertools.pairwise(bounds))]
    )


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize(
    "rows, N, K",
    [((250,), 256, 512), ((3, 0, 130, 7), 136, 64), (tuple(range(0, 170, 10)), 64, 1024)],
    ids=str,
)
def test_groups(rows, N, K, dtype):
    A, B, offsets, bounds = _inputs(rows, N, K, dtype)
    out = torch.full((A.shape[0], N), float("nan"), device="cuda", dtype=dtype)
    assert oasr_gemm.group_gemm(A, B, offsets, out=out) is out
    tol = 1e-2 if dtype == torch.float16 else 4e-2
    torch.testing.assert_close(out.float(), _ref(A, B, bounds), rtol=tol, atol=tol)


def test_invalid_offsets_without_the_check_do_not_fault():
    A, B, _, bounds = _inputs((5, 6, 7), 64, 64, torch.float16)
    bad = torch.tensor([0, 5, 30, 18], dtype=torch.int32, device="cuda")  # group 1 past the end
    out = torch.full((18, 64), float("nan"), device="cuda", dtype=torch.float16)
    oasr_gemm.group_gemm(A, B, bad, out=out, check_offsets=False)
    torch.cuda.synchronize()  # no fault: the bad groups were left empty
    torch.testing.assert_close(out[:5].float(), _ref(A, B, bounds)[:5], rtol=1e-2, atol=1e-2)


def test_alignment_refusals():
    A, B, offsets, _ = _inputs((5, 6), 64, 64, torch.float16)
    with pytest.raises(ValueError, match="multiples of 8"):
        oasr_gemm.group_gemm(A[:, :60], B[:, :, :60], offsets)
    with pytest.raises(ValueError, match="multiples of 8"):
        oasr_gemm.group_gemm(A, B[:, :60], offsets)
    torch.cuda.synchronize()


def test_graph_capture():
    A, B, offsets, bounds = _inputs((100, 0, 57, 300), 128, 256, torch.float16, seed=1)
    out = torch.empty(A.shape[0], 128, device="cuda", dtype=torch.float16)
    oasr_gemm.group_gemm(A, B, offsets, out=out)  # builds and loads outside the capture
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=side):
        oasr_gemm.group_gemm(A, B, offsets, out=out, check_offsets=False)
    out.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(out.float(), _ref(A, B, bounds), rtol=1e-2, atol=1e-2)
