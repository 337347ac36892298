"""`group_gemm` without a GPU: every refusal (each names the fix), the offsets check, and the
PyTorch twin against a float64 reference."""

from __future__ import annotations

import itertools

import pytest
import torch

import oasr_gemm
from oasr_gemm.grouped import check_offsets_values


def _inputs(dtype=torch.float16, rows=(4, 0, 6), N=8, K=16):
    gen = torch.Generator().manual_seed(0)
    A = torch.randn(sum(rows), K, generator=gen).to(dtype)
    B = (torch.randn(len(rows), N, K, generator=gen) / 4).to(dtype)
    offsets = torch.tensor([0, *torch.tensor(rows).cumsum(0).tolist()], dtype=torch.int32)
    return A, B, offsets


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_twin_matches_float64(dtype):
    A, B, offsets = _inputs(dtype)
    bounds = offsets.tolist()
    want = torch.cat(
        [
            A[lo:hi].double() @ B[g].double().T
            for g, (lo, hi) in enumerate(itertools.pairwise(bounds))
        ]
    )
    tol = 2e-2 if dtype == torch.float16 else 8e-2
    got = oasr_gemm.group_gemm(A, B, offsets, backend="torch")
    torch.testing.assert_close(got.double(), want, rtol=tol, atol=tol)
    out = torch.full((10, 8), float("nan"), dtype=dtype)
    assert oasr_gemm.group_gemm(A, B, offsets, out=out, backend="torch") is out
    torch.testing.assert_close(out.double(), want, rtol=tol, atol=tol)


@pytest.mark.parametrize(
    "bounds, match",
    [
        ([1, 4, 10], "start at 0"),
        ([0, 4, 9], "end at A's row count 10"),
        ([0, 6, 4, 10], "decrease at group 1"),
    ],
)
def test_offsets_check(bounds, match):
    with pytest.raises(ValueError, match=match):
        check_offsets_values(bounds, 10)
    check_offsets_values([0, 0, 10, 10], 10)  # empty groups are fine


def test_refusals_name_the_fix():
    A, B, offsets = _inputs()
    with pytest.raises(ValueError, match="backend must be one of"):
        oasr_gemm.group_gemm(A, B, offsets, backend="cutlass")
    with pytest.raises(TypeError, match="int32 tensor"):
        oasr_gemm.group_gemm(A, B, offsets.long())
    with pytest.raises(TypeError, match="float16 or bfloat16"):
        oasr_gemm.group_gemm(A.float(), B.float(), offsets)
    with pytest.raises(TypeError, match="cast it"):
        oasr_gemm.group_gemm(A, B.bfloat16(), offsets)
    with pytest.raises(ValueError, match=r"A must be \[total, K\]"):
        oasr_gemm.group_gemm(A[None], B, offsets)
    with pytest.raises(ValueError, match="differ in K"):
        oasr_gemm.group_gemm(A[:, :8], B, offsets)
    with pytest.raises(ValueError, match=r"offsets must be \[G \+ 1\] = \[4\]"):
        oasr_gemm.group_gemm(A, B, offsets[:3])
    with pytest.raises(ValueError, match="decrease"):
        oasr_gemm.group_gemm(A, B, torch.tensor([0, 6, 4, 10], dtype=torch.int32))
    with pytest.raises(ValueError, match=r"out must be a contiguous \(10, 8\)"):
        oasr_gemm.group_gemm(A, B, offsets, out=torch.empty(10, 9, dtype=A.dtype))
    with pytest.raises(ValueError, match=r"A must be a CUDA tensor.*backend='torch'"):
        oasr_gemm.group_gemm(A, B, offsets)
