"""gemm_log_softmax's one-kernel head (V <= 512, sm90) on the GPU, taken at every size (the
speed rule's row bars set to 1): against a float64 reference
over odd and aligned M, K and V (K from one chunk of 64 to many, V at both edges of each
warpgroup layout: one or three of 128 columns, one or two of 256), with and without a bias,
N-D and row-strided A, fp16 and bf16; rows bitwise independent of M; a head whose A the kernel
before it writes (its dependent launch waits), eagerly and from a CUDA graph; the calls it
leaves to the two passes; the launcher's refusals. Its plain CUDA-graph capture is
test_gemm_log_softmax_gpu.py's (V 500 at 2000 rows)."""

from __future__ import annotations

import pytest
import torch
from gemm_head_helpers import TOLERANCES, replay_in_graph
from gemm_head_helpers import head_operands as _operands
from gemm_head_helpers import randn as _randn
from gemm_head_helpers import reference as _reference

import oasr_gemm
from oasr_gemm import head
from oasr_jit.testing import skip_unless_gpu

pytestmark = [
    skip_unless_gpu(),
    pytest.mark.skipif(
        not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] != 9,
        reason="the one-kernel head is sm90's",
    ),
]

DTYPES = [torch.float16, torch.bfloat16]


@pytest.fixture(autouse=True)
def one_kernel_for_small_calls(monkeypatch):
    """The kernel at every M and V it can take, not only where it is the faster route."""
    monkeypatch.setattr(head, "HEAD_MIN_ROWS", 1)
    monkeypatch.setattr(head, "HEAD_MIN_ROWS_ODD_VOCAB", 1)


def _check(A, B, C, dtype):
    assert head.runs_one_kernel(A, B, C, None)
    want = _reference(A, B, C)
    out = torch.full(want.shape, float("nan"), device="cuda", dtype=dtype)
    assert oasr_gemm.gemm_log_softmax(A, B, C, out=out) is out
    rtol, atol = TOLERANCES[dtype]
    torch.testing.assert_close(out.double(), want, rtol=rtol, atol=atol)
    assert torch.equal(oasr_gemm.gemm_log_softmax(A, B, C), out)  # a fresh output, same bits


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "M, K, V",
    [
        (1, 8, 1),  # one row, one column, K far below one chunk
        (63, 64, 32),  # a character vocabulary
        (64, 256, 500),  # BPE 500, one full CTA
        (65, 72, 256),  # a second CTA of one row; K past a chunk by 8; one warpgroup of 256
        (301, 256, 257),  # three warpgroups of 128, the third with one column
        (301, 512, 501),  # odd V: the scalar stores
        (1000, 1000, 512),  # the largest vocabulary, K not a multiple of 64
        (4000, 256, 500),
        # warpgroups of 128 columns where they cover V with fewer columns (V <= 128, 257-384)
        (129, 136, 333),  # three of them, odd V; a second CTA of one row
        (192, 8, 384),  # three, every column in use; K of one k16 step
        (200, 192, 128),  # one of 128, every column in use
        (77, 64, 129),  # the smallest V on one warpgroup of 256
        # staged rows padded to V + 8 at V a multiple of 16 (two 16-byte pieces a row at V 16)
        (97, 64, 16),
        (130, 128, 448),
        (3, 64, 9),  # not padded: out's rows, one span, each row at another offset of 16 bytes
        # padded for odd V next to a multiple of 64 past 256, copied a row a warp, realigned
        (1001, 72, 385),  # (so is V 257 above)
        (77, 64, 319),
        (130, 256, 511),
    ],
)
def test_matches_float64(M, K, V, dtype):
    _check(*_operands(M, K, V, dtype), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_without_bias_nd_and_row_strided_a(dtype):
    A, B, _ = _operands(210, 128, 100, dtype)
    _check(A, B, None, dtype)
    _check(A.view(3, 70, 128), B, None, dtype)  # N-D A: rows of the flattened view
    wide = _randn(210, 136, dtype=dtype, seed=5)
    _check(wide[:, :128], B, _randn(100, dtype=dtype, seed=6), dtype)  # rows 272 bytes apart


@pytest.mark.parametrize("dtype", DTYPES)
def test_rows_do_not_depend_on_m(dtype):
    """Each row is computed by one CTA from that row alone: bitwise the same in any batch."""
    A, B, C = _operands(300, 256, 500, dtype)
    full = oasr_gemm.gemm_log_softmax(A, B, C)
    for lo, hi in [(37, 38), (64, 128), (250, 300)]:
        assert torch.equal(oasr_gemm.gemm_log_softmax(A[lo:hi], B, C), full[lo:hi])


@pytest.mark.parametrize("graph", [False, True])
def test_a_head_reading_the_previous_heads_output_waits_for_it(graph):
    """Launched as the programmatic dependent of the kernel before it, the head may start while
    that kernel still writes: here the first head's output (NaN-poisoned before it runs) is the
    second head's A, and the first head lets dependents start before its stores (8000 rows: 125
    CTAs, so the second head's first CTAs find free SMs). The second reads A only after
    griddepcontrol.wait, so it sees the first head's rows, eagerly and replayed from a graph."""
    dtype = torch.float16
    A, B, C = _operands(8000, 256, 256, dtype)
    # the first head's log-probabilities are all near -5.5: small weights keep the second head's
    # logits under 8, where the tolerances' one-ulp rounding allowance holds
    B2 = _randn(100, 256, dtype=dtype, seed=3, scale=0.02)
    C2 = _randn(100, dtype=dtype, seed=4)
    first = torch.empty(8000, 256, device="cuda", dtype=dtype)
    second = torch.empty(8000, 100, device="cuda", dtype=dtype)

    def call():
        first.fill_(float("nan"))
        oasr_gemm.gemm_log_softmax(A, B, C, out=first)
        oasr_gemm.gemm_log_softmax(first, B2, C2, out=second)

    if graph:
        replay_in_graph(call, second)
    else:
        second.fill_(float("nan"))
        call()
    rtol, atol = TOLERANCES[dtype]
    torch.testing.assert_close(first.double(), _reference(A, B, C), rtol=rtol, atol=atol)
    torch.testing.assert_close(second.double(), _reference(first, B2, C2), rtol=rtol, atol=atol)


def test_calls_it_leaves_to_the_two_passes_are_right():
    dtype = torch.float16
    A, B, C = _operands(200, 64, 513, dtype)
    for args in [
        (A, B, C, None),  # V 513
        (A, B[:500], _randn(200, 500, dtype=dtype, seed=7), None),  # a matrix C
        (A, B[:500], C[:500], torch.empty(200 * 500 + 1, device="cuda", dtype=dtype)[1:]),
    ]:
        a, b, c, out = args
        if out is not None:
            out = out.view(200, 500)  # 2 bytes off 16-byte alignment
        assert not head.runs_one_kernel(a, b, c, out)
        logits = oasr_gemm.gemm(a, b, c, backend="torch").float()
        got = oasr_gemm.gemm_log_softmax(a, b, c, out=out)
        torch.testing.assert_close(got.float(), torch.log_softmax(logits, -1), rtol=2e-3, atol=3e-2)


def test_launcher_refusals_raise_and_leave_the_context_usable():
    dtype = torch.float16
    run = head._head()
    A, B, C = _operands(64, 64, 100, dtype)
    out = torch.empty(64, 100, device="cuda", dtype=dtype)
    with pytest.raises(ValueError, match="1 to 512"):
        run(torch.empty(64, 513, device="cuda", dtype=dtype), A, _randn(513, 64, dtype=dtype), None)
    with pytest.raises(ValueError, match="multiple of 8"):
        run(out, A[:, :60], _randn(100, 60, dtype=dtype).contiguous(), None)
    with pytest.raises(ValueError, match="out"):
        run(out[:, :99], A, B[:99], None)  # out not contiguous
    with pytest.raises(ValueError, match="bias"):
        run(out, A, B, C[:99])
    with pytest.raises(ValueError, match="start on 16 bytes"):
        run(torch.empty(64 * 100 + 1, device="cuda", dtype=dtype)[1:].view(64, 100), A, B, None)
    with pytest.raises(TypeError, match="dtype"):
        run(out.float(), A, B, None)
    with pytest.raises(ValueError, match="shares storage"):
        shared = torch.empty(64 * 100 + 64 * 64, device="cuda", dtype=dtype)
        run(shared[: 64 * 100].view(64, 100), shared[2304 : 2304 + 4096].view(64, 64), B, None)
    run(out, A, B, C)  # the context still runs kernels
    torch.cuda.synchronize()
    torch.testing.assert_close(out.double(), _reference(A, B, C), rtol=1e-3, atol=1e-2)


def test_the_speed_rule_routes_small_calls_to_the_two_passes(monkeypatch):
    monkeypatch.undo()
    A, B, C = _operands(head.HEAD_MIN_ROWS, 256, 500, torch.float16)
    assert head.runs_one_kernel(A, B, C, None)
    assert not head.runs_one_kernel(A[1:], B, C, None)  # V 500 under 2000 rows
    assert head.runs_one_kernel(A[:64], B[:256], C[:256], None)  # V 256: any M
    odd = A[: head.HEAD_MIN_ROWS_ODD_VOCAB]  # an odd V > 256 from fewer rows
    assert head.runs_one_kernel(odd, B[:301], C[:301], None)
    assert not head.runs_one_kernel(odd[1:], B[:301], C[:301], None)
    _check(odd, B[:301], C[:301], torch.float16)  # and the call is right
