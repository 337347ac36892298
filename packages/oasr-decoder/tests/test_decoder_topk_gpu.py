"""GPU tests of oasr_decoder.topk against a stable-sort reference and torch.topk: every dtype x
vocabulary x k, 1-D to 3-D inputs, strided and misaligned rows, NaN / +-inf / -0.0 / constant /
tied / periodic rows (the overflow path), outputs poisoned first, ``out=``, the int32-indices
helper of the CTC beam search, a CUDA-graph capture, and refusals (Python and launcher)."""

from __future__ import annotations

import math

import pytest
import torch

import oasr_decoder
from oasr_decoder import _jit, twins
from oasr_decoder.topk_cuda import MAX_K, _topk_indices_int32
from oasr_decoder.twins import order_keys
from oasr_jit.testing import poison_, skip_unless_gpu

pytestmark = skip_unless_gpu()

DTYPES = [torch.float32, torch.float16, torch.bfloat16]


def reference_topk(x: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Value descending, equal values by index ascending: the PyTorch twin on the CPU."""
    return tuple(twins.topk(x.cpu(), k))


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.view(torch.int32 if t.dtype == torch.float32 else torch.int16)


def check_topk(x: torch.Tensor, k: int, values: torch.Tensor, indices: torch.Tensor) -> None:
    """Exactly the reference (indices, and values bit for bit); torch.topk's values, and its
    indices wherever the value is unique in its row."""
    shape = (*x.shape[:-1], k)
    assert values.shape == shape and indices.shape == shape
    assert values.dtype == x.dtype and indices.dtype in (torch.int64, torch.int32)
    want_values, want_indices = reference_topk(x, k)
    torch.testing.assert_close(indices.cpu().long(), want_indices, rtol=0, atol=0)
    # bit for bit, except NaN payloads: torch's CPU gather of 16-bit NaNs does not keep them
    # (test_negative_nan_payloads_are_largest_and_kept checks ours on float32)
    got_values = values.cpu()
    nan = want_values.isnan()
    assert torch.equal(got_values.isnan(), nan)
    assert torch.equal(_bits(got_values)[~nan], _bits(want_values)[~nan])
    torch_values, torch_indices = torch.topk(x, k, dim=-1)
    torch.testing.assert_close(values, torch_values, rtol=0, atol=0, equal_nan=True)
    keys = order_keys(x)
    got = keys.gather(-1, indices.long())
    unique = (keys.unsqueeze(-2) == got.unsqueeze(-1)).sum(-1) == 1  # [..., k]
    assert torch.equal(indices.long()[unique], torch_indices[unique])


def _randn(*shape, dtype, scale=3.0):
    return (torch.randn(shape, device="cuda") * scale).to(dtype)


def _call(x: torch.Tensor, k: int) -> oasr_decoder.TopK:
    """topk into poisoned outputs (an element the kernel never wrote fails the check)."""
    shape = (*x.shape[:-1], k)
    out = (
        poison_(torch.empty(shape, dtype=x.dtype, device=x.device)),
        poison_(torch.empty(shape, dtype=torch.int64, device=x.device)),
    )
    result = oasr_decoder.topk(x, k, out=out)
    assert result.values is out[0] and result.indices is out[1]
    return result


# V: 1, 7, 31 (rows shorter than one warp's vectors: every group holds at most one element);
# 500 / 501 (a CTC BPE vocabulary, and off the vector width); 5000 (the target), 8404, 16384
# (the largest vocabularies), 20000 (past them). k: 1, the beam-search sizes, the maximum.
VOCABS = [1, 7, 31, 500, 501, 5000, 8404, 16384, 20000]
KS = [1, 5, 16, 64, 128]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("vocab", VOCABS)
@pytest.mark.parametrize("k", KS)
def test_matches_reference(k, vocab, dtype):
    if k > vocab:
        pytest.skip("k > V is refused (tested below)")
    x = _randn(37, vocab, dtype=dtype)  # 37 rows: a partial last block (8 / W rows per block)
    values, indices = _call(x, k)
    check_topk(x, k, values, indices)
    plain = oasr_decoder.topk(x, k)
    assert torch.equal(plain.indices, indices) and torch.equal(_bits(plain.values), _bits(values))


@pytest.mark.parametrize("dtype", DTYPES)
def test_dims_and_strided_rows(dtype):
    wide = _randn(24, 2 * 5000 + 8, dtype=dtype)
    views = {
        "1d": _randn(5000, dtype=dtype),
        "1d_short": _randn(7, dtype=dtype),
        "3d_btv": _randn(2, 125, 5000, dtype=dtype),  # [B, T, V]
        "column_slice": wide[:, :5000],
        "misaligned_start": wide[:, 1:5001],  # every row starts off 16 bytes
        "row_slice": wide[::3, 3:5003],
        "odd_row_stride": _randn(33, 5003, dtype=dtype)[:, :5000],  # each row its own alignment
        "3d_slice": wide.view(4, 6, -1)[:, :, 5:505],
        "single_row_3d": _randn(1, 1, 501, dtype=dtype),
    }
    for name, x in views.items():
        for k in (1, 10, 65):
            if k > x.shape[-1]:
                continue
            values, indices = _call(x, k)
            try:
                check_topk(x, k, values, indices)
            except AssertionError as exc:
                raise AssertionError(f"{name}, k={k}: {exc}") from exc


def _special_rows(vocab: int, dtype) -> dict[str, torch.Tensor]:
    """Rows that defeat the group filter (the overflow path) or carry the special values."""
    col = torch.arange(vocab, device="cuda", dtype=torch.float32)
    rows = 6
    nan, inf = math.nan, math.inf
    specials = torch.tensor([nan, inf, -inf, -0.0, 0.0, 1.0, -1.0], device="cuda")
    cases = {
        "constant": torch.full((rows, vocab), 1.5, device="cuda"),
        "zeros": torch.zeros(rows, vocab, device="cuda"),
        "neg_zeros_and_zeros": torch.where(torch.rand(rows, vocab, device="cuda") < 0.5, -0.0, 0.0),
        "all_neg_inf": torch.full((rows, vocab), -inf, device="cuda"),
        "all_pos_inf": torch.full((rows, vocab), inf, device="cuda"),
        "all_nan": torch.full((rows, vocab), nan, device="cuda"),
        "few_values": torch.randint(0, 8, (rows, vocab), device="cuda").float(),
        "periodic_256": (col % 256).expand(rows, vocab).contiguous(),  # constant per group
        "periodic_2048": (col % 2048 - 1000).expand(rows, vocab).contiguous(),
        "specials": specials[torch.randint(0, 7, (rows, vocab), device="cuda")],
        "sparse_nan": torch.where(
            torch.rand(rows, vocab, device="cuda") < 0.01,
            nan,
            torch.randn(rows, vocab, device="cuda"),
        ),
        "log_probs": torch.randn(rows, vocab, device="cuda").mul(4).log_softmax(-1),
    }
    return {name: x.to(dtype) for name, x in cases.items()}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("vocab", [7, 500, 5000, 16384])
def test_special_rows(vocab, dtype):
    for name, x in _special_rows(vocab, dtype).items():
        for k in (1, 5, 16, 65, 128):
            if k > vocab:
                continue
            values, indices = _call(x, k)
            try:
                check_topk(x, k, values, indices)
            except AssertionError as exc:
                raise AssertionError(f"{name}, k={k}: {exc}") from exc


def test_negative_nan_payloads_are_largest_and_kept():
    # -NaN and a NaN with a payload: both the largest, tied (index order), copied bit for bit.
    x = torch.randn(3, 600, device="cuda")
    bits = x.view(torch.int32)
    bits[:, 17] = -4194304  # 0xffc00000: -NaN
    bits[:, 400] = 0x7F800001  # a signalling NaN with payload 1
    values, indices = _call(x, 4)
    assert indices[:, :2].tolist() == [[17, 400]] * 3
    assert values.view(torch.int32)[:, :2].tolist() == [[-4194304, 0x7F800001]] * 3
    check_topk(x, 4, values, indices)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("warps_per_row", [1, 2, 4, 8])
def test_every_team_width(warps_per_row, dtype):
    """Each width of a row's team of warps on the same rows (the launcher picks one from the
    number of rows): rows shorter than a team's first batch, misaligned rows, 13 rows (a partial
    last block: idle teams), k up to the maximum, and blocks whose teams mix the overflow path
    (constant rows) with the fast one."""
    mod = _jit.topk_module()

    def check(x, k):
        values = poison_(torch.empty(*x.shape[:-1], k, dtype=dtype, device="cuda"))
        indices = poison_(torch.empty(*x.shape[:-1], k, dtype=torch.int64, device="cuda"))
        mod.topk(values, indices, x, k, warps_per_row)
        check_topk(x, k, values, indices)

    for vocab in (31, 501, 5000, 20000):
        x = _randn(13, vocab + 3, dtype=dtype)[:, 3:]
        for k in (1, 16, 128):
            if k <= vocab:
                check(x, k)
    mixed = _randn(13, 5000, dtype=dtype)
    mixed[::2] = 1.5  # every other row constant: more candidates than the buffer holds
    for k in (5, 128):
        check(mixed, k)
    for name, x in _special_rows(5000, dtype).items():
        try:
            check(x, 16)
        except AssertionError as exc:
            raise AssertionError(f"{name}: {exc}") from exc


@pytest.mark.parametrize("dtype", DTYPES)
def test_many_rows_ctc_shape(dtype):
    """The decoder's use: 16 utterances x 750 frames of V 5000 log-probs, k 10."""
    x = torch.randn(16, 750, 5000, device="cuda").mul(3).log_softmax(-1).to(dtype)
    values, indices = _call(x, 10)
    torch_values, _ = torch.topk(x, 10, dim=-1)
    torch.testing.assert_close(values, torch_values, rtol=0, atol=0)
    assert torch.equal(_bits(x.gather(-1, indices)), _bits(values))
    keys = order_keys(x)
    ranked = keys.gather(-1, indices)
    assert bool((ranked[..., :-1] >= ranked[..., 1:]).all())
    tie = ranked[..., :-1] == ranked[..., 1:]
    assert bool((indices[..., :-1] < indices[..., 1:])[tie].all())
    # at the k-th value, the chosen elements are that value's lowest indices
    kth = ranked[..., -1:]
    chosen = (ranked == kth).sum(-1)
    last = torch.where(ranked == kth, indices, -1).amax(-1, keepdim=True)
    cols = torch.arange(5000, device="cuda")
    assert torch.equal(((keys == kth) & (cols <= last)).sum(-1), chosen)
    check_topk(x[3, :40], 10, values[3, :40], indices[3, :40])


def test_empty_inputs_return_at_once():
    for shape, k in (((0, 500), 5), ((2, 0, 500), 128), ((0, 1), 1)):
        x = torch.randn(shape, device="cuda")
        values, indices = oasr_decoder.topk(x, k)
        assert values.shape == indices.shape == (*shape[:-1], k)
        assert indices.dtype == torch.int64
        assert _topk_indices_int32(x, k).shape == (*shape[:-1], k)


@pytest.mark.parametrize("dtype", DTYPES)
def test_int32_indices_helper(dtype):
    x = _randn(3, 40, 5000, dtype=dtype)
    for k in (1, 10, 65):
        got = _topk_indices_int32(x, k)
        assert got.dtype == torch.int32 and got.shape == (3, 40, k)
        torch.testing.assert_close(got.long().cpu(), reference_topk(x, k)[1], rtol=0, atol=0)
    x2d = x.view(-1, 5000)[:, 1:4001]
    got = _topk_indices_int32(x2d, 65)
    torch.testing.assert_close(got.long().cpu(), reference_topk(x2d, 65)[1], rtol=0, atol=0)


@pytest.mark.parametrize("dtype", DTYPES)
def test_two_level_rows(dtype):
    """[B, T, V] rows that do not collapse into one stride: a slice over T (a streaming chunk)
    and a [T, B, V] tensor transposed; read in place."""
    full = _randn(4, 12, 501, dtype=dtype)
    tbv = _randn(9, 3, 700, dtype=dtype)
    for x in (full[:, 3:9], full[1:, ::2, 1:], tbv.transpose(0, 1)):
        for k in (1, 21, 128):
            values, indices = _call(x, k)
            check_topk(x, k, values, indices)


def test_launcher_indices_only_and_int32():
    x = _randn(9, 501, dtype=torch.float16)
    want = reference_topk(x, 16)[1]
    for idx_dtype in (torch.int32, torch.int64):
        indices = poison_(torch.empty(9, 16, dtype=idx_dtype, device="cuda"))
        _jit.topk_module().topk(None, indices, x, 16, 0)
        torch.testing.assert_close(indices.long().cpu(), want, rtol=0, atol=0)


def test_cuda_graph_capture():
    x = _randn(64, 5000, dtype=torch.float16)
    out = (
        torch.empty(64, 16, dtype=torch.float16, device="cuda"),
        torch.empty(64, 16, dtype=torch.int64, device="cuda"),
    )
    oasr_decoder.topk(x, 16, out=out)  # build and load outside the capture
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.stream(stream), torch.cuda.graph(graph, stream=stream):
        oasr_decoder.topk(x, 16, out=out)
    torch.cuda.current_stream().wait_stream(stream)
    x.copy_(_randn(64, 5000, dtype=torch.float16))
    poison_(out[0])
    poison_(out[1])
    graph.replay()
    torch.cuda.synchronize()
    check_topk(x, 16, *out)


def test_python_refusals():
    x = _randn(4, 300, dtype=torch.float32)
    cases = [
        ((x.cpu(), 5), ValueError, r"must be a CUDA tensor.*\.cuda\(\)"),
        ((x.int(), 5), TypeError, "supported: float32, float16 or bfloat16"),
        ((x.double(), 5), TypeError, "supported"),
        ((x, 0), ValueError, "k must be at least 1"),
        ((x, 301), ValueError, r"k = 301 is larger than V = 300"),
        ((x, MAX_K + 1), ValueError, "for larger k use torch.topk"),
        ((x, 2.0), TypeError, "k must be an int"),
        ((_randn(300, 4, dtype=torch.float32).t(), 2), ValueError, "unit stride over V"),
        (
            (_randn(4, 3, 5, 10, dtype=torch.float32)[::2, :, :2], 2),
            ValueError,
            "not a set of rows",
        ),
    ]
    for args, error, match in cases:
        with pytest.raises(error, match=match):
            oasr_decoder.topk(*args)
    good = (torch.empty(4, 5, device="cuda"), torch.empty(4, 5, dtype=torch.int64, device="cuda"))
    bad_outs = [
        ((good[0].half(), good[1]), TypeError, "out values has dtype"),
        ((good[0], good[1].int()), TypeError, r"out indices has dtype torch.int32.*torch.int64"),
        ((good[0][:, :4], good[1]), ValueError, r"out values must have shape \(4, 5\)"),
        (
            (good[0], torch.empty(5, 4, dtype=torch.int64, device="cuda").t()),
            ValueError,
            "contiguous",
        ),
        ((good[0].cpu(), good[1]), ValueError, "out values is on cpu"),
        (good[0], TypeError, r"out must be a pair \(values, indices\)"),
    ]
    for out, error, match in bad_outs:
        with pytest.raises(error, match=match):
            oasr_decoder.topk(x, 5, out=out)
    with pytest.raises(ValueError, match="for larger k use torch.topk"):
        _topk_indices_int32(x, 129)


def test_launcher_refusals():
    mod = _jit.topk_module()
    x = _randn(4, 300, dtype=torch.float32)
    indices = torch.empty(4, 5, dtype=torch.int64, device="cuda")
    values = torch.empty(4, 5, device="cuda")
    with pytest.raises(ValueError, match="k must be at most 128"):
        mod.topk(None, torch.empty(4, 129, dtype=torch.int64, device="cuda"), x, 129, 0)
    with pytest.raises(ValueError, match=r"warps_per_row must be 0 \(choose\), 1, 2, 4 or 8"):
        mod.topk(None, indices, x, 5, 3)
    with pytest.raises(ValueError, match="k must be at least 1"):
        mod.topk(None, torch.empty(4, 0, dtype=torch.int64, device="cuda"), x, 0, 0)
    with pytest.raises(ValueError, match="k must be at most V"):
        mod.topk(None, indices, x[:, :4], 5, 0)
    with pytest.raises(TypeError, match="indices has dtype float32"):
        mod.topk(None, values, x, 5, 0)
    with pytest.raises(TypeError, match="values .* and x .* must have the same dtype"):
        mod.topk(values.half(), indices, x, 5, 0)
    with pytest.raises(ValueError, match="indices must have x's leading dims then k = 5"):
        mod.topk(values, indices[:3], x, 5, 0)
    with pytest.raises(ValueError, match="values shares storage with x"):
        mod.topk(x.view(-1)[:20].view(4, 5), indices, x, 5, 0)  # contiguous, inside x
    with pytest.raises(ValueError, match="unit stride in its last dimension|not a set of rows"):
        mod.topk(values, indices, _randn(300, 4, dtype=torch.float32).t(), 5, 0)
    with pytest.raises(ValueError, match="must be a CUDA tensor"):
        mod.topk(values, indices.cpu(), x, 5, 0)
    with pytest.raises(ValueError, match="x is on device"):
        mod.topk(values, indices, x.cpu(), 5, 0)
