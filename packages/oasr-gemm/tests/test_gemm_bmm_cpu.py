"""`bmm` without a GPU: how calls are brought to the kernel's 4-D form (no copies), every
refusal (each names the fix), and the PyTorch twin against a float64 reference."""

from __future__ import annotations

import pytest
import torch

import oasr_gemm
from oasr_gemm.batched import batch_views


def _randn(*shape, dtype=torch.float16, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


def test_views_share_storage_and_broadcast_with_zero_strides():
    A = _randn(2, 3, 5, 12)
    B = _randn(3, 12, 7)  # broadcast over the first batch dim
    batch, a4, b4, layout = batch_views(A, B)
    assert batch == (2, 3) and layout == "b_row"
    assert a4.data_ptr() == A.data_ptr() and b4.data_ptr() == B.data_ptr()
    assert a4.shape == (2, 3, 5, 12) and a4.stride() == A.stride()
    assert b4.shape == (2, 3, 12, 7) and b4.stride() == (0, 84, 7, 1)
    # one batch dim: a leading dim of one; a 2-D B is broadcast over the batch
    batch, a4, b4, _ = batch_views(_randn(4, 5, 12), _randn(12, 7))
    assert batch == (4,) and a4.shape == (1, 4, 5, 12) and b4.stride(1) == 0


def test_b_contiguous_along_k_is_taken_as_a_view():
    Bt = _randn(3, 7, 12)  # [N, K] rows: B = Bt.transpose(-1, -2) is K-contiguous
    B = Bt.transpose(-1, -2)
    _, _, b4, layout = batch_views(_randn(3, 5, 12), B)
    assert layout == "b_col" and b4.data_ptr() == Bt.data_ptr() and b4.stride(-2) == 1
    # N = 1 or K = 1: either stride works; the row layout is taken
    assert batch_views(_randn(3, 5, 12), _randn(3, 12, 1))[3] == "b_row"


@pytest.mark.parametrize(
    "A, B, match",
    [
        (_randn(5, 12), _randn(12, 7), "with a batch dim"),
        (_randn(3, 5, 12), _randn(3, 11, 7), "differ in K"),
        (_randn(2, 5, 12), _randn(3, 12, 7), "do not broadcast"),
        (_randn(2, 2, 2, 5, 12), _randn(12, 7), "one or two batch dims"),
        (_randn(3, 12, 5).transpose(-1, -2), _randn(3, 12, 7), "unit stride along K"),
        (_randn(3, 5, 12), _randn(3, 12, 14)[..., ::2], "no unit stride along K or N"),
    ],
)
def test_refusals_name_the_fix(A, B, match):
    with pytest.raises(ValueError, match=match):
        oasr_gemm.bmm(A, B)


def test_argument_refusals():
    A, B = _randn(3, 5, 12), _randn(3, 12, 7)
    with pytest.raises(TypeError, match="float16 or bfloat16"):
        oasr_gemm.bmm(A.float(), B.float())
    with pytest.raises(TypeError, match="cast it"):
        oasr_gemm.bmm(A, B.bfloat16())
    with pytest.raises(TypeError, match="torch.Tensor"):
        oasr_gemm.bmm(A, B.tolist())
    with pytest.raises(ValueError, match="backend must be one of"):
        oasr_gemm.bmm(A, B, backend="cublas")
    with pytest.raises(ValueError, match=r"out must be a contiguous \(3, 5, 7\)"):
        oasr_gemm.bmm(A, B, out=torch.empty(3, 5, 8, dtype=A.dtype))
    with pytest.raises(ValueError, match=r"A must be a CUDA tensor.*backend='torch'"):
        oasr_gemm.bmm(A, B)  # the kernels on CPU tensors: the twin is the way


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_twin_matches_float64(dtype):
    A, B = _randn(2, 3, 5, 12, dtype=dtype), _randn(3, 12, 7, dtype=dtype, seed=1)
    want = A.double() @ B.double()
    got = oasr_gemm.bmm(A, B, backend="torch")
    tol = 2e-2 if dtype == torch.float16 else 8e-2
    torch.testing.assert_close(got.double(), want, rtol=tol, atol=tol)
    out = torch.full((2, 3, 5, 7), float("nan"), dtype=dtype)
    assert oasr_gemm.bmm(A, B, out=out, backend="torch") is out
    torch.testing.assert_close(out.double(), want, rtol=tol, atol=tol)
