"""The table of the 16-bit GELU kernels (``oasr_norm._gelu_table``), checked on the CPU: every
entry is the representable value nearest to a float64 GELU (found here by a search over the
format's values, not by the module's rounding), specials follow PyTorch, PyTorch's float32
GELU agrees to an ulp outside the negative tail, and the rendered module carries the table. The
kernels that read it are tested in test_norm_activation_gpu.py."""

from __future__ import annotations

import bisect
import math

import pytest
import torch

from oasr_norm import _gelu_table, _jit

TORCH_DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}


def _values(dtype):
    return _gelu_table.decode(dtype)


def _gelu64(x):
    return x * 0.5 * math.erfc(-x / math.sqrt(2.0))


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
def test_every_finite_entry_is_the_nearest_value(dtype):
    values = _values(dtype)
    table = _gelu_table.gelu_table(dtype)
    finite = sorted({v for v in values if math.isfinite(v)})
    checked = 0
    for bits, x in enumerate(values):
        if not math.isfinite(x):
            continue
        g = _gelu64(x)
        got = values[table[bits]]
        i = bisect.bisect_left(finite, g)
        nearest = min(finite[max(i - 1, 0) : i + 1], key=lambda v: abs(v - g))
        assert abs(got - g) <= abs(nearest - g), (dtype, hex(bits), x, got, nearest)
        if got == 0.0:  # the sign of a zero output is x's (x * Phi(x), Phi >= 0)
            assert math.copysign(1.0, got) == math.copysign(1.0, x), (dtype, hex(bits))
        checked += 1
    assert checked > 63000


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
def test_special_inputs_follow_pytorch(dtype):
    values = _values(dtype)
    table = _gelu_table.gelu_table(dtype)
    nan = {"fp16": 0x7E00, "bf16": 0x7FC0}[dtype]
    for bits, x in enumerate(values):
        y = values[table[bits]]
        if x != x:
            assert table[bits] == nan, hex(bits)
        elif x == math.inf:
            assert y == math.inf
        elif x == -math.inf:
            assert table[bits] == nan  # PyTorch: -inf * (1 + erf(-inf)) = -inf * 0
        elif x >= 8.0:
            assert y == x  # Phi(x) rounds to 1
        elif x <= -40.0:
            assert y == 0.0 and math.copysign(1.0, y) < 0
    assert values[table[0]] == 0.0 and table[0] == 0 and table[0x8000] == 0x8000


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
def test_pytorch_float32_gelu_agrees_to_an_ulp_outside_the_tail(dtype):
    """PyTorch's 0.5 x (1 + erf(x / sqrt 2)) in float32, rounded to the dtype: one ulp off the
    table on a few inputs; below x ~ -3.5 its 1 + erf cancels (more ulps, then 0, where the
    table keeps the tiny true value: absolute differences under 1e-3). Beyond 1e4 PyTorch's CPU
    form overflows for bf16 (x * 2 before the 0.5)."""
    td = TORCH_DTYPES[dtype]
    bits = torch.arange(65536, dtype=torch.int32).to(torch.int16)
    x = bits.view(td)
    table = torch.tensor(_gelu_table.gelu_table(dtype), dtype=torch.int32).to(torch.int16)
    ours = table.view(td)
    theirs = torch.nn.functional.gelu(x.float()).to(td)
    finite = torch.isfinite(x) & (x.float().abs() < 1e4)
    ordered = lambda t: torch.where(t < 0, -(t & 0x7FFF), t).int()  # noqa: E731
    ulps = (ordered(ours.view(torch.int16)) - ordered(theirs.view(torch.int16))).abs()
    tail = x.float() < -3.5
    outside = finite & ~tail
    assert int((ulps[outside] > 1).sum()) == 0
    assert int((ulps[outside] == 1).sum()) < 300  # rounding differences only
    assert float((ours.float() - theirs.float())[finite & tail].abs().max()) < 1e-3


def test_rounding_ties_to_even_and_subnormals():
    r = _gelu_table.round_to_format
    assert r(1.0 + 2.0**-11, "fp16") == 1.0  # a tie: to the even mantissa
    assert r(1.0 + 3 * 2.0**-11, "fp16") == 1.0 + 2.0**-9
    assert r(2.0**-25, "fp16") == 0.0  # half the smallest subnormal: ties to 0
    assert r(1.5 * 2.0**-24, "fp16") == 2.0**-23
    assert r(1.0 + 2.0**-8, "bf16") == 1.0
    assert r(2.0**-133 * 1.5, "bf16") == 2.0**-132
    assert r(-0.0, "fp16") == 0.0 and math.copysign(1.0, r(-0.0, "fp16")) < 0


def test_rendered_module_carries_both_tables():
    spec = _jit.gen_gelu_table_module()
    rendered = {src.name: src.text for src in spec.sources if src.text is not None}
    text = rendered["gelu_table.cu"]
    for dtype in ("fp16", "bf16"):
        body = _gelu_table.table_source(dtype)
        assert body in text
        assert len(body.splitlines()) == 4096 and body.count(",") == 65536
    with pytest.raises(ValueError, match="dtype"):
        _gelu_table.gelu_table("fp32")
