"""`gemm_log_softmax` without a GPU: the twin against a float64 reference, the argument checks,
which calls the one-kernel head takes, which GEMM computes the logits otherwise (the sm90
kernels, or cuBLAS for shapes they cannot take), and the odd-V path through the padded weight
(its logits, and when it is taken)."""

from __future__ import annotations

import pytest
import torch

import oasr_gemm
from oasr_gemm import head
from oasr_gemm.head import gemm_runs_kernels, runs_one_kernel


def _inputs(dtype, M=7, V=40, K=24, seed=0):
    gen = torch.Generator().manual_seed(seed)
    A = torch.randn(2, M, K, generator=gen).to(dtype)
    B = (torch.randn(V, K, generator=gen) * K**-0.5 * 4).to(dtype)
    C = torch.randn(V, generator=gen).to(dtype)
    return A, B, C


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_twin_matches_float64(dtype):
    A, B, C = _inputs(dtype, V=41)
    want = torch.log_softmax(A.double() @ B.double().T + C.double(), dim=-1)
    got = oasr_gemm.gemm_log_softmax(A, B, C, backend="torch")
    assert got.shape == (2, 7, 41) and got.dtype == dtype
    tol = 2e-2 if dtype == torch.float16 else 8e-2
    torch.testing.assert_close(got.double(), want, rtol=tol, atol=tol)
    out = torch.full((2, 7, 41), float("nan"), dtype=dtype)
    assert oasr_gemm.gemm_log_softmax(A, B, C, out=out, backend="torch") is out
    assert torch.equal(out, got)


def test_refusals_name_the_fix():
    A, B, C = _inputs(torch.float16)
    with pytest.raises(ValueError, match=r"A must be a CUDA tensor.*backend='torch'"):
        oasr_gemm.gemm_log_softmax(A, B, C)
    with pytest.raises(ValueError, match="differ in K"):
        oasr_gemm.gemm_log_softmax(A, B[:, :8], backend="torch")
    with pytest.raises(ValueError, match="bias"):
        oasr_gemm.gemm_log_softmax(A, B, C[:9], backend="torch")
    with pytest.raises(ValueError, match="backend must be one of"):
        oasr_gemm.gemm_log_softmax(A, B, backend="cublas")
    with pytest.raises(ValueError, match="out must be a contiguous"):
        oasr_gemm.gemm_log_softmax(A, B, out=torch.empty(2, 7, 39).half(), backend="torch")
    with pytest.raises(TypeError, match="cast it"):
        oasr_gemm.gemm_log_softmax(A, B.bfloat16(), backend="torch")


def test_the_kernels_take_aligned_operands_and_cublas_the_rest():
    A, B, C = _inputs(torch.float16, V=40, K=24)
    assert gemm_runs_kernels(A, B, C)
    assert gemm_runs_kernels(A, B, torch.randn(2, 7, 40).half())
    assert not gemm_runs_kernels(A, B[:37], C[:37])  # V = 37: output rows of 74 bytes
    assert not gemm_runs_kernels(A[..., :20], B[:, :20], C)  # K = 20
    assert not gemm_runs_kernels(A.transpose(0, 1), B, C)  # rows not one stride: a copy
    assert not gemm_runs_kernels(A, B, torch.randn(2, 7, 44).half()[..., :40])  # C rows of 44
    assert oasr_gemm.gemm_log_softmax is not None and "gemm_log_softmax" in dir(oasr_gemm)


@pytest.mark.parametrize("C_kind", ["none", "bias"])
def test_the_padded_weight_path_computes_the_same_logits(C_kind):
    """The odd-V GEMM against the weight padded with zero rows (run here by cuBLAS's CPU twin,
    torch.mm) gives the logits of the unpadded GEMM in its first V columns."""
    from oasr_gemm.head import _cublas_logits

    A, B, C = _inputs(torch.float32, M=5, V=37, K=24)
    C = C if C_kind == "bias" else None
    _, padded = _cublas_logits(A, B, C, torch.empty(2, 5, 37), pad=True)
    assert padded.shape == (10, 40) and padded.is_contiguous()
    torch.testing.assert_close(padded[:, 37:], torch.zeros(10, 3))  # the zero rows' columns
    padded = padded[:, :37]
    out = torch.empty(2, 5, 37)
    _, in_place = _cublas_logits(A, B, C, out, pad=False)
    assert in_place.data_ptr() == out.data_ptr()
    torch.testing.assert_close(padded, in_place)
    torch.testing.assert_close(in_place, (A @ B.T + (0 if C is None else C)).reshape(10, 37))


@pytest.mark.parametrize(
    "C_kind, pad",
    [("none", False), ("bias", False), ("matrix", False), ("none", True), ("bias", True)],
)  # a matrix C is never padded (pads_weight)
def test_the_cublas_route_allocates_the_output_when_none_is_given(C_kind, pad):
    """out=None: a new [..., V] output (by one F.linear where nothing is padded) whose rows are
    the logits, or which the row pass fills from the padded buffer."""
    from oasr_gemm.head import _cublas_logits

    A, B, C = _inputs(torch.float32, M=5, V=37, K=24)
    C = {"none": None, "bias": C, "matrix": torch.randn(2, 5, 37)}[C_kind]
    out, logits = _cublas_logits(A, B, C, None, pad=pad)
    assert out.shape == (2, 5, 37) and out.is_contiguous()
    assert (logits.data_ptr() == out.data_ptr()) == (not pad)
    assert logits.shape == (10, 40 if pad else 37)
    want = A @ B.T + (0 if C is None else C)
    torch.testing.assert_close(logits[:, :37], want.reshape(10, 37))


def test_when_an_odd_vocabulary_takes_the_padded_weight():
    from oasr_gemm import head

    def takes_padding(M, V, C=None):
        _, logits = head._cublas_logits(torch.zeros(M, 8), torch.zeros(V, 8), C, torch.empty(M, V))
        return logits.shape[1] != V

    big = -(-head.PAD_MIN_OUTPUTS // 1025)  # rows for 1025 columns to reach the output bar
    assert takes_padding(big, 1025)
    assert not takes_padding(big, 1032)  # a multiple of 8: in place
    assert not takes_padding(big - 1, 1025)  # below the output bar
    assert not takes_padding(2 * big * 3, 500)  # below the vocabulary bar
    assert takes_padding(2 * big, head.PAD_MIN_VOCAB + 1)
    assert not takes_padding(2 * big, head.PAD_MIN_VOCAB - 1)
    assert not takes_padding(big, 1025, torch.zeros(big, 1025))  # a matrix C: in place
    assert takes_padding(big, 1025, torch.zeros(1025))  # a bias is padded with the weight


def test_the_one_kernel_head_takes_small_vocabularies_on_sm90(monkeypatch):
    """The eligibility rule on CPU tensors posing as sm90 CUDA ones (the rule reads metadata)."""
    A, B, C = _inputs(torch.float16, V=40, K=24)
    assert not runs_one_kernel(A, B, C, None)  # a CPU tensor is never the kernel's
    monkeypatch.setattr(torch.Tensor, "device", property(lambda t: torch.device("cuda", 0)))
    monkeypatch.setattr(head, "_is_sm90", lambda device: True)
    assert runs_one_kernel(A, B, C, None)  # V 40: one warpgroup, any M
    wide = torch.randn(head.HEAD_MAX_VOCAB, 24).half()  # V 512: two warpgroups, from 2000 rows
    rows = torch.randn(head.HEAD_MIN_ROWS, 24).half()
    assert runs_one_kernel(rows, wide, None, None)
    assert not runs_one_kernel(rows[1:], wide, None, None)
    assert runs_one_kernel(rows[1:], wide[:256], None, None)
    assert not runs_one_kernel(rows[1:], wide[:258], None, None)  # an even V > 256
    odd_rows = head.HEAD_MIN_ROWS_ODD_VOCAB  # an odd V > 256: cuBLAS is slow at an odd N
    assert runs_one_kernel(rows[:odd_rows], wide[:257], None, None)
    assert not runs_one_kernel(rows[: odd_rows - 1], wide[:257], None, None)
    # the rest of the rule on small shapes
    monkeypatch.setattr(head, "HEAD_MIN_ROWS", 1)
    assert runs_one_kernel(A, B, C, None)
    assert runs_one_kernel(A, B, None, torch.empty(2, 7, 40).half())
    big = torch.randn(head.HEAD_MAX_VOCAB + 1, 24).half()
    assert runs_one_kernel(A, big[: head.HEAD_MAX_VOCAB], None, None)  # V 512: the largest
    assert not runs_one_kernel(A, big, None, None)  # V 513: two passes
    assert runs_one_kernel(A, B[:37], C[:37], None)  # any V up to 512, odd ones too
    assert not runs_one_kernel(A, B, torch.randn(2, 7, 40).half(), None)  # a matrix C
    assert not runs_one_kernel(A[..., :20], B[:, :20], C, None)  # K = 20
    assert not runs_one_kernel(A[..., :0], B[:, :0], C, None)  # K = 0: the two-pass refusal
    assert not runs_one_kernel(A.transpose(0, 1), B, C, None)  # rows not one stride
    assert runs_one_kernel(torch.randn(14, 32).half()[:, :24], B, C, None)  # rows of 32
    assert not runs_one_kernel(torch.randn(14, 28).half()[:, :24], B, C, None)  # rows of 56 bytes
    assert not runs_one_kernel(A, B, C, torch.empty(2 * 7 * 40 + 1).half()[1:].view(2, 7, 40))
    assert not runs_one_kernel(A, torch.randn(40, 32).half()[:, :24], C, None)  # B strided
    monkeypatch.setattr(head, "_is_sm90", lambda device: False)
    assert not runs_one_kernel(A, B, C, None)


def test_where_the_cluster_head_wins():
    """The speed rule (a pure function of the call's M, V and K; measured on the H200): a band
    of output counts, odd vocabularies only."""
    wins = head.cluster_head_wins
    assert wins(8000, 1025, 256) and wins(4000, 2047, 256) and wins(2000, 3001, 256)
    assert wins(2499, 2001, 256) and not wins(2498, 2001, 256)  # from 5M outputs at K 256
    assert wins(4497, 2001, 256) and not wins(4498, 2001, 256)  # up to 9M
    assert not wins(16000, 1025, 256) and not wins(8000, 2047, 256)  # past the band
    assert not wins(2000, 3073, 256)  # past V 3072 at K 256
    assert not wins(8000, 1024, 256) and not wins(1000, 5000, 256)  # aligned V: two passes
    assert wins(2000, 1025, 512) and wins(8000, 1099, 320)  # K up to 512: V up to 1100
    assert wins(1464, 1025, 512) and not wins(1463, 1025, 512)  # from 1.5M outputs
    assert not wins(16000, 1025, 512) and not wins(2000, 1101, 512) and not wins(2000, 1025, 520)


def test_the_cluster_head_takes_what_it_can_where_it_wins(monkeypatch):
    """Eligibility on CPU tensors posing as sm90 CUDA ones (the rule reads metadata)."""
    A = torch.randn(8000, 256).half()
    B = torch.randn(1025, 256).half()
    assert not head.runs_cluster_head(A, B, None, None)  # a CPU tensor is never the kernel's
    monkeypatch.setattr(torch.Tensor, "device", property(lambda t: torch.device("cuda", 0)))
    monkeypatch.setattr(head, "_is_sm90", lambda device: True)
    assert head.runs_cluster_head(A, B, None, None)
    assert head.runs_cluster_head(A.view(2, 4000, 256), B, torch.randn(1025).half(), None)
    assert not head.runs_cluster_head(A[:64], B, None, None)  # where it loses
    monkeypatch.setattr(head, "cluster_head_wins", lambda M, V, K: True)
    assert not head.runs_cluster_head(A, B[:512], None, None)  # V 512: the one-kernel head's
    assert head.runs_cluster_head(A, torch.randn(head.CLUSTER_MAX_VOCAB, 256).half(), None, None)
    big = torch.randn(head.CLUSTER_MAX_VOCAB + 1, 256).half()
    assert not head.runs_cluster_head(A, big, None, None)  # past 16 CTAs' shared memory
    assert not head.runs_cluster_head(
        torch.randn(64, 520).half(), torch.randn(1025, 520).half(), None, None
    )
    assert not head.runs_cluster_head(A, B, torch.randn(8000, 1025).half(), None)  # a matrix C
    assert not head.runs_cluster_head(A[:, :250], B[:, :250], None, None)  # K not a multiple of 8


def test_the_padded_width():
    from oasr_gemm.head import PAD_WIDE_VOCAB, padded_vocab

    assert [padded_vocab(V) for V in (1025, 2047, 4095)] == [1032, 2048, 4096]
    assert padded_vocab(PAD_WIDE_VOCAB + 1) == PAD_WIDE_VOCAB + 32
    assert [padded_vocab(V) for V in (5001, 8404, 8416)] == [5024, 8416, 8416]
