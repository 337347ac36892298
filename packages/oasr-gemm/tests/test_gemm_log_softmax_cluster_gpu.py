"""gemm_log_softmax's cluster head (512 < V <= 12288, K <= 512, sm90) on the GPU, taken at every
size (the speed rule, `cluster_head_wins`, lifted): against a float64 reference over odd and
aligned M, K and V (one CTA to clusters of 16, slices ending inside a chunk, K from 8 to 512),
with and without a bias, N-D and row-strided A, fp16 and bf16; every split of the vocabulary a
benchmark can force; rows bitwise independent of M; the launcher's refusals; CUDA-graph capture;
the speed rule itself."""

from __future__ import annotations

import pytest
import torch
from gemm_head_helpers import assert_matches_reference, replay_in_graph
from gemm_head_helpers import head_operands as _operands
from gemm_head_helpers import randn as _randn

import oasr_gemm
from oasr_gemm import head
from oasr_jit.testing import skip_unless_gpu

pytestmark = [
    skip_unless_gpu(),
    pytest.mark.skipif(
        not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] != 9,
        reason="the cluster head is sm90's",
    ),
]

DTYPES = [torch.float16, torch.bfloat16]


@pytest.fixture(autouse=True)
def cluster_head_for_every_size(monkeypatch):
    """The kernel at every M and V it can take, not only where it is the faster route."""
    monkeypatch.setattr(head, "cluster_head_wins", lambda M, V, K: True)


def _check(A, B, C, dtype):
    assert head.runs_cluster_head(A, B, C, None)
    out = torch.full((*A.shape[:-1], B.shape[0]), float("nan"), device="cuda", dtype=dtype)
    assert oasr_gemm.gemm_log_softmax(A, B, C, out=out) is out
    assert_matches_reference(out, A, B, C)
    assert torch.equal(oasr_gemm.gemm_log_softmax(A, B, C), out)  # a fresh output, same bits


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "M, K, V",
    [
        (1, 8, 513),  # one row; V one column past the one-kernel head; K far below one chunk
        (63, 64, 1000),  # one CTA (8 chunks), V a multiple of 8: 16-byte stores
        (65, 72, 1025),  # a second row block of one row; K past a chunk by 8; odd V
        (300, 256, 5000),  # BPE 5000: a cluster of 5
        (257, 512, 8404),  # characters: K 512 (A's 64 KB resident), 8-byte stores
        (129, 512, 12288),  # the largest vocabulary at the largest K: a cluster of 14
        (1000, 200, 4098),  # 4-byte stores; the last CTA's slice ends inside a chunk
        (3, 16, 777),
    ],
)
def test_matches_float64(M, K, V, dtype):
    _check(*_operands(M, K, V, dtype), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_without_bias_nd_and_row_strided_a(dtype):
    A, B, _ = _operands(210, 128, 2000, dtype)
    _check(A, B, None, dtype)
    _check(A.view(3, 70, 128), B, None, dtype)  # N-D A: rows of the flattened view
    wide = _randn(210, 136, dtype=dtype, seed=5)
    _check(wide[:, :128], B, _randn(2000, dtype=dtype, seed=6), dtype)  # rows 272 bytes apart


@pytest.mark.parametrize("max_chunks", [1, 2, 3, 5, 16])
def test_every_split_of_the_vocabulary(max_chunks):
    """Chunks a CTA (the benchmark's knob): clusters of 16 (1 chunk each) to one CTA (16)."""
    dtype = torch.float16
    A, B, C = _operands(130, 64, 2041, dtype)
    out = torch.full((130, 2041), float("nan"), device="cuda", dtype=dtype)
    head._cluster_head()(out, A, B, C, max_chunks)
    assert_matches_reference(out, A, B, C)


@pytest.mark.parametrize("dtype", DTYPES)
def test_rows_do_not_depend_on_m(dtype):
    """Each row's logits come from one CTA's MMAs and its sums from the same merge order:
    bitwise the same in any batch."""
    A, B, C = _operands(300, 256, 5000, dtype)
    full = oasr_gemm.gemm_log_softmax(A, B, C)
    for lo, hi in [(37, 38), (64, 128), (250, 300)]:
        assert torch.equal(oasr_gemm.gemm_log_softmax(A[lo:hi], B, C), full[lo:hi])


def test_launcher_refusals_raise_and_leave_the_context_usable():
    dtype = torch.float16
    run = head._cluster_head()
    A, B, C = _operands(64, 64, 1000, dtype)
    out = torch.empty(64, 1000, device="cuda", dtype=dtype)
    with pytest.raises(ValueError, match="K up to 512"):
        run(out, _randn(64, 520, dtype=dtype), _randn(1000, 520, dtype=dtype), None, 0)
    wide = _randn(64, 512, dtype=dtype)
    with pytest.raises(ValueError, match="cannot split V = 16000"):  # 16 CTAs hold 14336 at K 512
        run(
            torch.empty(64, 16000, device="cuda", dtype=dtype),
            wide,
            _randn(16000, 512, dtype=dtype),
            None,
            0,
        )
    with pytest.raises(ValueError, match="cannot split V = 2177"):  # 17 chunks, 1 a CTA
        run(
            torch.empty(64, 2177, device="cuda", dtype=dtype),
            A,
            _randn(2177, 64, dtype=dtype),
            None,
            1,
        )
    with pytest.raises(ValueError, match="max_chunks"):
        run(out, A, B, None, -1)
    with pytest.raises(ValueError, match="multiple of 8"):
        run(out, A[:, :60], _randn(1000, 60, dtype=dtype).contiguous(), None, 0)
    with pytest.raises(ValueError, match="out"):
        run(out[:, :999], A, B[:999], None, 0)  # out not contiguous
    with pytest.raises(ValueError, match="bias"):
        run(out, A, B, C[:999], 0)
    with pytest.raises(ValueError, match="start on 16 bytes"):
        run(
            torch.empty(64 * 1000 + 1, device="cuda", dtype=dtype)[1:].view(64, 1000), A, B, None, 0
        )
    with pytest.raises(TypeError, match="dtype"):
        run(out.float(), A, B, None, 0)
    with pytest.raises(ValueError, match="shares storage"):
        shared = torch.empty(64 * 1000 + 64 * 64, device="cuda", dtype=dtype)
        run(
            shared[: 64 * 1000].view(64, 1000),
            shared[60000 : 60000 + 4096].view(64, 64),
            B,
            None,
            0,
        )
    run(out, A, B, C, 0)  # the context still runs kernels
    torch.cuda.synchronize()
    assert_matches_reference(out, A, B, C)


def test_graph_capture():
    dtype = torch.bfloat16
    A, B, C = _operands(500, 256, 5000, dtype)
    out = torch.empty(500, 5000, device="cuda", dtype=dtype)
    assert head.runs_cluster_head(A, B, C, out)
    replay_in_graph(lambda: oasr_gemm.gemm_log_softmax(A, B, C, out=out), out)
    assert_matches_reference(out, A, B, C)


def test_the_speed_rule_routes_calls(monkeypatch):
    monkeypatch.undo()
    dtype = torch.float16
    B = _randn(2047, 256, dtype=dtype)
    A = _randn(4400, 256, dtype=dtype)  # 9.0M outputs at V 2047: past the band
    assert not head.runs_cluster_head(A, B, None, None)
    assert head.runs_cluster_head(A[:3909], B, None, None)  # 8.0M
    assert not head.runs_cluster_head(A[:2442], B, None, None)  # under 5M outputs
    assert not head.runs_cluster_head(A[:3909], B[:2040], None, None)  # an aligned V
    wide = _randn(1500, 520, dtype=dtype)
    assert not head.runs_cluster_head(wide, _randn(1025, 520, dtype=dtype), None, None)  # K 520
    small = _randn(1500, 512, dtype=dtype)
    assert head.runs_cluster_head(small, _randn(1025, 512, dtype=dtype), None, None)  # K 512
    A, B, C = _operands(1500, 512, 1025, dtype)
    assert_matches_reference(oasr_gemm.gemm_log_softmax(A, B, C), A, B, C)
