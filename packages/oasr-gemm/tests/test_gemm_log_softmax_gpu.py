"""`gemm_log_softmax` on the GPU against an fp32 reference: the CTC vocabularies (the one-kernel
head, test_gemm_log_softmax_head_gpu.py's subject, takes V <= 256 and V 500 from 2000 rows; the
cluster head, test_gemm_log_softmax_cluster_gpu.py's, is switched off here so that the two
passes run: aligned V on the sm90 kernels or cuBLAS, odd ones on cuBLAS), bias or matrix C, N-D A,
``out=``, rows past the register capacity, empty inputs, ``backend="oasr"`` refusing what the
kernels cannot take, refusals of the row pass, CUDA-graph capture."""

from __future__ import annotations

import pytest
import torch
from gemm_head_helpers import randn as _randn
from gemm_head_helpers import replay_in_graph

import oasr_gemm
from oasr_gemm.head import gemm_runs_kernels, runs_one_kernel
from oasr_jit.testing import skip_unless_gpu

pytestmark = skip_unless_gpu()


@pytest.fixture(autouse=True)
def two_passes_past_the_one_kernel_head(monkeypatch):
    """V > 512 on the two passes at every size (the cluster head has its own tests)."""
    monkeypatch.setattr(oasr_gemm.head, "cluster_head_wins", lambda M, V, K: False)


DTYPES = [torch.float16, torch.bfloat16]


def _check(A, B, C, dtype, **kw):
    # the reference rounds the logits to the dtype, as the op (and PyTorch) does
    logits = oasr_gemm.gemm(A, B, C, backend="torch")
    want = torch.log_softmax(logits.float(), dim=-1)
    out = torch.full(want.shape, float("nan"), device="cuda", dtype=dtype)
    got = oasr_gemm.gemm_log_softmax(A, B, C, out=out, **kw)
    assert got is out
    # log-probs reach -30, where an fp16 ulp is 0.016 and a bf16 one 0.125, and the logits of
    # the two GEMMs may differ by an ulp of theirs (0.008 / 0.06 at 10)
    atol, rtol = (3e-2, 2e-3) if dtype == torch.float16 else (2e-1, 4e-3)
    torch.testing.assert_close(out.float(), want, rtol=rtol, atol=atol)
    fresh = oasr_gemm.gemm_log_softmax(A, B, C, **kw)
    assert torch.equal(fresh, out)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("V", [500, 1025, 5000, 8404, 16384, 20000])
def test_vocabularies(V, dtype):
    M, K = 300, 256
    A = _randn(M, K, dtype=dtype)
    B = _randn(V, K, dtype=dtype, seed=1, scale=3 * K**-0.5)
    C = _randn(V, dtype=dtype, seed=2)
    assert gemm_runs_kernels(A, B, C) == (V % 8 == 0)
    _check(A, B, C, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_nd_input_matrix_c_and_no_c(dtype):
    A = _randn(3, 70, 64, dtype=dtype)
    B = _randn(96, 64, dtype=dtype, seed=1, scale=0.3)
    _check(A, B, None, dtype)  # the one-kernel head (V <= 256)
    _check(A, B, _randn(3, 70, 96, dtype=dtype, seed=2), dtype)  # the sm90 GEMM, then rows
    _check(A, B[:93], None, dtype)  # the one-kernel head
    _check(A, B[:93], _randn(3, 70, 93, dtype=dtype, seed=3), dtype)  # odd V, matrix C: cuBLAS


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("V", [257, 383, 511])
def test_odd_vocabularies_under_the_head_bar(V, dtype):
    """An odd V in 257-511 under HEAD_MIN_ROWS_ODD_VOCAB rows: cuBLAS, then the row pass over
    the unpadded logits (in place where no out is given)."""
    M, K = 200, 256
    A = _randn(M, K, dtype=dtype)
    B = _randn(V, K, dtype=dtype, seed=1, scale=3 * K**-0.5)
    C = _randn(V, dtype=dtype, seed=2)
    assert not runs_one_kernel(A, B, C, None) and not oasr_gemm.head.pads_weight(M, V, C)
    _check(A, B, C, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_odd_vocabulary_against_the_padded_weight(dtype):
    M, V, K = 1000, 8404, 64
    # the padded path, not the in-place one
    assert M * V >= oasr_gemm.head.PAD_MIN_OUTPUTS and V >= oasr_gemm.head.PAD_MIN_VOCAB
    A = _randn(M, K, dtype=dtype)
    B = _randn(V, K, dtype=dtype, seed=1, scale=3 * K**-0.5)
    _check(A, B, _randn(V, dtype=dtype, seed=2), dtype)
    _check(A, B, None, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "M, V, W, out_offset",
    [
        # an odd multiple of 4 values, out's rows on 16 and 8 bytes in turn: realigned halves
        (300, 8404, 8408, 0),  # a block of 512 threads a row
        (301, 8404, 8408, 4),  # the first row half-way into a vector
        (1, 8404, 8408, 4),
        (5, 16380, 16384, 0),  # the widest row a block holds
        (300, 1028, 1032, 0),  # a block of 128 threads
        (300, 500, 520, 0),  # a warp a row; logits wider than the next multiple of 8
        # an even width that is not: realigned by words (rows start 0-3 words before a vector)
        (300, 8402, 8408, 0),  # 2 mod 8
        (300, 8406, 8416, 0),  # 6 mod 8
        (300, 1026, 1032, 0),  # a block of 128 threads
        (5, 16382, 16384, 0),  # the widest row a block holds
        (64, 138, 144, 0),  # 18 vectors: a warp a row
        (300, 5000, 5000, 2),  # a multiple of 8 into an out on 4 bytes, not 16
        (300, 8404, 8408, 2),  # an odd multiple of 4 into an out on 4 bytes, not 8
        # any other width or alignment: realigned by byte permutes
        (300, 10001, 10016, 0),  # 3 vectors a thread, the kernel held to 40 registers
        (300, 4233, 4256, 3),
        (300, 2047, 2048, 0),
        (300, 1025, 1032, 0),
        (64, 133, 136, 0),  # 17 vectors: the narrowest row of a whole warp
        (300, 8404, 8408, 1),  # out on an odd element
        # unpadded rows of 257-512 that 8-byte vectors do not fit (an odd V's logits from
        # cuBLAS): the aligned body, two 16-byte vectors a lane
        (300, 383, 383, 0),
        (64, 511, 511, 0),
        (300, 257, 257, 0),  # the first row's body starts at 0, the last one's at 7
        (33, 302, 302, 0),  # 2 mod 4
        (300, 383, 383, 1),  # out's rows at another offset mod 16 than the logits': single values
        # launch_softmax's kernels
        (70, 36, 40, 0),  # a few lanes a row
        (5, 20004, 20008, 0),  # past the registers: the two-pass long-row kernel
        (300, 5000, 5000, 0),  # no padding
    ],
)
def test_row_pass_from_padded_logits(M, V, W, out_offset, dtype):
    """The row pass over the first V of W columns, the padded GEMM's buffer: the padding may be
    read but is never used, whatever it holds."""
    logits = _randn(M, W, dtype=dtype, scale=4.0)
    logits[:, V:] = float("inf")
    logits[:, V + 1 :] = float("nan")
    want = torch.log_softmax(logits[:, :V].float(), dim=-1)
    store = torch.full((out_offset + M * V + 8,), float("nan"), device="cuda", dtype=dtype)
    out = store[out_offset : out_offset + M * V].view(M, V)
    oasr_gemm.head._row_pass()(out, logits)
    atol, rtol = (1e-2, 2e-3) if dtype == torch.float16 else (1e-1, 4e-3)
    torch.testing.assert_close(out.float(), want, rtol=rtol, atol=atol)
    assert torch.isnan(store[:out_offset]).all() and torch.isnan(store[-8:]).all()  # out only


def test_many_rows_on_the_sm90_kernels():
    dtype = torch.float16
    A = _randn(4000, 512, dtype=dtype)
    _check(A, _randn(5000, 512, dtype=dtype, seed=1, scale=0.1), None, dtype, backend="oasr")


def test_empty_and_refusals():
    dtype = torch.bfloat16
    B = _randn(40, 16, dtype=dtype)
    assert oasr_gemm.gemm_log_softmax(_randn(0, 16, dtype=dtype), B).shape == (0, 40)
    with pytest.raises(ValueError, match="not a multiple of 8"):  # V 1025: past the one kernel
        oasr_gemm.gemm_log_softmax(
            _randn(5, 16, dtype=dtype), _randn(1025, 16, dtype=dtype), backend="oasr"
        )
    with pytest.raises(ValueError, match="K is 0"):
        oasr_gemm.gemm_log_softmax(_randn(5, 0, dtype=dtype), _randn(37, 0, dtype=dtype))
    row_pass = oasr_gemm.head._row_pass()
    x = _randn(4, 48, dtype=dtype)
    with pytest.raises(ValueError, match="at least its columns"):
        row_pass(torch.empty(4, 56, device="cuda", dtype=dtype), x)  # logits narrower than out
    with pytest.raises(ValueError, match="at least its columns"):
        row_pass(torch.empty(5, 40, device="cuda", dtype=dtype), x)  # rows differ
    with pytest.raises(ValueError, match="in place"):
        row_pass(x.view(-1)[:160].view(4, 40), x)  # out at logits' start, not its rows
    with pytest.raises(ValueError, match="contiguous"):
        row_pass(x[:, :40], x[:, :40])  # out must be contiguous
    with pytest.raises(ValueError, match="shares storage"):
        row_pass(x.view(-1)[8:168].view(4, 40), x[:, :40])  # overlaps, not the same rows
    torch.cuda.synchronize()


@pytest.mark.parametrize("M, V", [(2000, 500), (256, 5000), (255, 1025), (1000, 1025)])
def test_graph_capture(M, V):
    """V 500 at 2000 rows runs the one-kernel head, V 5000 the sm90 GEMM or cuBLAS, V 1025
    cuBLAS in place (255 rows: under the padding's output bar) or against the padded weight."""
    dtype = torch.float16
    A = _randn(M, 256, dtype=dtype)
    B = _randn(V, 256, dtype=dtype, seed=1, scale=0.1)
    C = _randn(V, dtype=dtype, seed=2)
    out = torch.empty(M, V, device="cuda", dtype=dtype)
    assert runs_one_kernel(A, B, C, out) == (V == 500)
    assert oasr_gemm.head.pads_weight(M, V, C) == (M == 1000)
    replay_in_graph(lambda: oasr_gemm.gemm_log_softmax(A, B, C, out=out), out)
    want = torch.log_softmax(oasr_gemm.gemm(A, B, C, backend="torch").float(), dim=-1)
    torch.testing.assert_close(out.float(), want, rtol=1e-2, atol=2e-2)
