"""CPU tests of softmax, log_softmax and masked_softmax (run in CI, no GPU): the PyTorch twins
against independent float64 expressions (odd shapes, broadcast and as_strided biases, [..., ::2]
mask slices, key padding, fully masked rows), and argument validation of the public ops, which
must refuse before any module is built. The kernels are tested in test_norm_softmax_gpu.py."""

from __future__ import annotations

import pytest
import torch
from norm_act_softmax_helpers import DTYPES, assert_close, cuda_looking, no_module_builds

import oasr_norm
from oasr_norm import twins

torch.manual_seed(0)
NEG_INF = float("-inf")


def _x(*shape, dtype=torch.float32, scale=3.0):
    return (torch.randn(shape, dtype=torch.float64) * scale).to(dtype)


def _softmax_ref(z: torch.Tensor) -> torch.Tensor:
    """exp(z - max) / sum in float64, written out (not torch.softmax)."""
    e = torch.exp(z - z.amax(-1, keepdim=True))
    return e / e.sum(-1, keepdim=True)


def _masked_ref(scores, bias, mask, kpm, scale):
    """The masked softmax as the docstring states it: torch.softmax over -inf-filled logits, a
    NaN row (nothing kept) set to zeros. float64."""
    z = scores.double() * scale
    if bias is not None:
        z = z + bias.double()
    keep = torch.ones(z.shape, dtype=torch.bool)
    if mask is not None:
        keep &= mask
    if kpm is not None:
        view = [kpm.shape[0]] + [1] * (scores.dim() - 2) + [kpm.shape[1]]
        keep &= ~kpm.reshape(view) if scores.dim() > 2 else ~kpm
    return torch.softmax(z.masked_fill(~keep, NEG_INF), -1).nan_to_num(0.0)


# ---------------------------------------------------------------------------------------------
# softmax / log_softmax twins


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1,), (7,), (3, 5, 11), (1, 1), (2, 0, 3), (4, 8195)], ids=str)
def test_softmax_twins_match_float64(shape, dtype):
    x = _x(*shape, dtype=dtype)
    want = _softmax_ref(x.double())
    assert_close(twins.softmax(x), want.to(dtype))
    assert_close(twins.log_softmax(x), torch.log(want).to(dtype))
    if x.numel():
        torch.testing.assert_close(
            twins.softmax(x).double().sum(-1),
            torch.ones(shape[:-1], dtype=torch.float64),
            rtol=0,
            atol=2e-2,
        )


def test_softmax_twin_extremes_follow_torch():
    x = torch.tensor([[0.0, NEG_INF, 1.0], [NEG_INF] * 3, [1e4, -1e4, 0.0]])
    torch.testing.assert_close(twins.softmax(x), torch.softmax(x, -1), equal_nan=True)
    torch.testing.assert_close(twins.log_softmax(x), torch.log_softmax(x, -1), equal_nan=True)
    assert twins.softmax(x)[0, 1] == 0 and torch.isnan(twins.softmax(x)[1]).all()


def test_softmax_twins_out_in_place_and_strided():
    base = _x(5, 2 * 33)
    x = base[:, :33]
    want = _softmax_ref(x.double()).float()
    out = torch.full((5, 33), float("nan"))
    assert twins.softmax(x, out=out) is out
    assert_close(out, want)
    y = x.contiguous()
    assert twins.softmax(y, dim=1, out=y) is y
    assert_close(y, want)


# ---------------------------------------------------------------------------------------------
# masked_softmax twin


def _rel_pos_window(batch, heads, q_len, k_len, dtype):
    """bias[b, h, i, j] = P[h, i + j]: a relative-position table read as a Hankel window with
    as_strided (strides 0 over B, P's row over H, 1 over Tq, 1 over Tk), never materialized."""
    table = _x(heads, q_len + k_len - 1, dtype=dtype)
    return table.as_strided((batch, heads, q_len, k_len), (0, table.stride(0), 1, 1))


CASES = {
    "plain": dict(),
    "bias_broadcast_heads": dict(bias="hqk"),
    "bias_rel_pos_window": dict(bias="window"),
    "bias_strided_slice": dict(bias="slice"),
    "mask_slice": dict(mask="slice"),
    "mask_broadcast_qk": dict(mask="qk"),
    "key_padding": dict(kpm=True),
    "all": dict(bias="window", mask="slice", kpm=True),
}


def _case(kind, batch, heads, q_len, k_len, dtype, bias_dtype=None):
    bias_dtype = bias_dtype or dtype
    scores = _x(batch, heads, q_len, k_len, dtype=dtype)
    bias = mask = kpm = None
    if kind.get("bias") == "hqk":
        bias = _x(heads, q_len, k_len, dtype=bias_dtype)
    elif kind.get("bias") == "window":
        bias = _rel_pos_window(batch, heads, q_len, k_len, bias_dtype)
    elif kind.get("bias") == "slice":
        bias = _x(batch, 1, 1, 2 * k_len, dtype=bias_dtype)[..., ::2]
    if kind.get("mask") == "slice":
        mask = torch.rand(batch, 1, q_len, 2 * k_len) > 0.3
        mask = mask[..., ::2]
        mask[0, 0, 0] = False  # one fully masked row
    elif kind.get("mask") == "qk":
        mask = torch.rand(q_len, k_len) > 0.5
    if kind.get("kpm"):
        kpm = torch.zeros(batch, k_len, dtype=torch.bool)
        for b in range(batch):
            kpm[b, k_len - b :] = True  # batch b pads its last b keys
        kpm[-1] = True  # the last batch entry is all padding: zeros
    return scores, bias, mask, kpm


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("k_len", [1, 5, 33, 250])
@pytest.mark.parametrize("kind", list(CASES))
def test_masked_twin_matches_float64(kind, k_len, dtype):
    scores, bias, mask, kpm = _case(CASES[kind], 3, 2, 4, k_len, dtype)
    want = _masked_ref(scores, bias, mask, kpm, 0.125)
    got = twins.masked_softmax(scores, bias, mask, kpm, scale=0.125)
    assert got.dtype == dtype and got.shape == scores.shape
    assert_close(got, want.to(dtype))
    assert not torch.isnan(got).any()
    kept_rows = want.sum(-1) > 0
    torch.testing.assert_close(
        got.double().sum(-1)[kept_rows],
        torch.ones(int(kept_rows.sum()), dtype=torch.float64),
        rtol=0,
        atol=2e-2,
    )


def test_masked_twin_float32_bias_fully_masked_rows_and_low_ranks():
    scores, bias, mask, kpm = _case(CASES["all"], 3, 2, 4, 17, torch.float16, torch.float32)
    got = twins.masked_softmax(scores, bias, mask, kpm)
    assert_close(got, _masked_ref(scores, bias, mask, kpm, 1.0).half())
    assert (got[2] == 0).all(), "an all-padding batch entry gives zeros"
    assert (got[0, :, 0] == 0).all(), "a fully masked row gives zeros"
    # a row whose only kept keys have a -inf bias keeps nothing either
    b = torch.zeros(1, 5)
    b[0, :3] = NEG_INF
    m = torch.tensor([[True, True, True, False, False]])
    assert (twins.masked_softmax(_x(1, 5), b, m) == 0).all()
    # 3-D [B, Tq, Tk] and 2-D [Tq, Tk] scores; key padding [B, Tk] / [1, Tk]
    s3, kp3 = _x(2, 3, 6), torch.tensor([[False] * 6, [False] * 4 + [True] * 2])
    assert_close(
        twins.masked_softmax(s3, key_padding_mask=kp3),
        _masked_ref(s3, None, None, kp3, 1.0).float(),
    )
    s2, kp2 = _x(3, 6), kp3[1:]
    assert_close(
        twins.masked_softmax(s2, key_padding_mask=kp2),
        _masked_ref(s2, None, None, kp2, 1.0).float(),
    )


def test_masked_twin_out_and_in_place():
    scores, bias, mask, _ = _case(CASES["all"], 2, 2, 3, 9, torch.float32)
    want = _masked_ref(scores, bias, mask, None, 0.5).float()
    out = torch.full(scores.shape, float("nan"))
    assert twins.masked_softmax(scores, bias, mask, scale=0.5, out=out) is out
    assert_close(out, want)
    assert twins.masked_softmax(scores, bias, mask, scale=0.5, out=scores) is scores
    assert_close(scores, want)


# ---------------------------------------------------------------------------------------------
# validation of the public ops: refused in Python, before any module is built


@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_softmax_ops_refuse_bad_arguments_before_building(op, monkeypatch):
    fn = getattr(oasr_norm, op)
    x = cuda_looking(_x(4, 6))
    with no_module_builds(monkeypatch):
        with pytest.raises(ValueError, match=r"\.cuda\(\)"):
            fn(_x(4, 6))
        with pytest.raises(TypeError, match="dtype"):
            fn(cuda_looking(torch.ones(4, 6, dtype=torch.int64)))
        with pytest.raises(ValueError, match="unit stride"):
            fn(cuda_looking(_x(6, 4)).t())
        with pytest.raises(ValueError, match="uniformly strided rows"):
            fn(cuda_looking(_x(8, 3, 10))[::2])
        for dim in (0, -2, 5):
            with pytest.raises(ValueError, match="last dimension"):
                fn(x, dim=dim)
        with pytest.raises(ValueError, match="at least 1"):
            fn(cuda_looking(torch.tensor(1.0)))
        with pytest.raises(ValueError, match="shape"):
            fn(x, out=cuda_looking(torch.empty(4, 5)))
        with pytest.raises(TypeError, match="dtype"):
            fn(x, out=cuda_looking(torch.empty(4, 6, dtype=torch.bfloat16)))
        with pytest.raises(ValueError, match="contiguous"):
            fn(x, out=cuda_looking(torch.empty(6, 4)).t())


def test_masked_softmax_refuses_bad_arguments_before_building(monkeypatch):
    scores = cuda_looking(_x(2, 3, 4, 5))
    fn = oasr_norm.masked_softmax
    with no_module_builds(monkeypatch):
        with pytest.raises(ValueError, match=r"\.cuda\(\)"):
            fn(_x(2, 3, 4, 5))
        with pytest.raises(TypeError, match="dtype"):
            fn(cuda_looking(torch.ones(2, 3, 4, 5, dtype=torch.int32)))
        with pytest.raises(ValueError, match="unit stride"):
            fn(cuda_looking(_x(2, 3, 5, 4)).transpose(-1, -2))
        with pytest.raises(ValueError, match="at least 2"):
            fn(cuda_looking(_x(5)))
        with pytest.raises(ValueError, match=r"\[B, H, Tq, Tk\]"):
            fn(cuda_looking(_x(1, 2, 3, 4, 5)))
        with pytest.raises(ValueError, match="does not broadcast"):
            fn(scores, cuda_looking(_x(3, 3, 5)))
        with pytest.raises(ValueError, match="does not broadcast"):
            fn(scores, cuda_looking(_x(1, 2, 3, 4, 5)))
        with pytest.raises(TypeError, match="float32"):
            fn(scores, cuda_looking(_x(4, 5, dtype=torch.float64)))
        with pytest.raises(ValueError, match="bias is on cpu"):
            fn(scores, _x(4, 5))
        with pytest.raises(TypeError, match="bool"):
            fn(scores, mask=cuda_looking(torch.ones(4, 5)))
        with pytest.raises(ValueError, match="does not broadcast"):
            fn(scores, mask=cuda_looking(torch.ones(4, 6, dtype=torch.bool)))
        with pytest.raises(TypeError, match="bool"):
            fn(scores, key_padding_mask=cuda_looking(torch.zeros(2, 5, dtype=torch.uint8)))
        for shape in [(3, 5), (2, 4), (2, 1, 5), (5,)]:
            with pytest.raises(ValueError, match=r"key_padding_mask must be \[B, Tk\]"):
                fn(scores, key_padding_mask=cuda_looking(torch.zeros(shape, dtype=torch.bool)))
        with pytest.raises(ValueError, match="shape"):
            fn(scores, out=cuda_looking(torch.empty(2, 3, 4, 4)))
        with pytest.raises(TypeError, match="dtype"):
            fn(scores, out=cuda_looking(torch.empty(2, 3, 4, 5, dtype=torch.float16)))


def test_twins_refuse_like_the_ops():
    with pytest.raises(ValueError, match="last dimension"):
        twins.softmax(_x(3, 4), dim=0)
    with pytest.raises(ValueError, match="last dimension"):
        twins.log_softmax(_x(3, 4), dim=-2)
    with pytest.raises(TypeError, match="dtype"):
        twins.softmax(torch.ones(3, dtype=torch.int32))
    with pytest.raises(ValueError, match="does not broadcast"):
        twins.masked_softmax(_x(2, 4, 5), _x(3, 4, 5))
    with pytest.raises(ValueError, match="key_padding_mask"):
        twins.masked_softmax(_x(2, 4, 5), key_padding_mask=torch.zeros(3, 5, dtype=torch.bool))
    with pytest.raises(ValueError, match="shape"):
        twins.masked_softmax(_x(2, 4, 5), out=torch.empty(2, 4, 4))


def test_ops_are_registered_and_documented():
    for op in ("softmax", "log_softmax", "masked_softmax"):
        fn = getattr(oasr_norm, op)
        assert fn.__doc__ and "Equivalent to" in fn.__doc__, op
        assert hasattr(fn, "__wrapped__"), f"{op} is not decorated with @oasr_api"
