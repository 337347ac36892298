"""CPU tests of the activations and GLU (run in CI, no GPU): the PyTorch twins against
independent torch expressions in float64, and argument validation of the public ops, which must
refuse before any module is built. The kernels are tested in test_norm_activation_gpu.py."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from norm_act_softmax_helpers import DTYPES, assert_close, cuda_looking, no_module_builds

import oasr_norm
from oasr_norm import twins

torch.manual_seed(0)

# Independent references (float64): torch's own functions where it has them.
REFERENCES = {
    "gelu": F.gelu,
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "sigmoid": torch.sigmoid,
    "tanh": torch.tanh,
    "relu": F.relu,
    "swish": F.silu,
    "swoosh_l": lambda x: F.softplus(x - 4.0) - 0.08 * x - 0.035,
    "swoosh_r": lambda x: F.softplus(x - 1.0) - 0.08 * x - 0.313261687,
}
UNARY = list(REFERENCES)

# Odd shapes: 0-D, 1-D, widths off any vector, a singleton, an empty batch, an ASR width.
SHAPES = [(), (7,), (3, 5, 11), (1, 1), (2, 0, 3), (4, 1280), (2, 3, 192)]


def _x(*shape, dtype=torch.float32):
    return (torch.randn(shape, dtype=torch.float64) * 3).to(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("op", UNARY)
def test_unary_twins_match_torch(op, shape, dtype):
    x = _x(*shape, dtype=dtype)
    want = REFERENCES[op](x.double()).to(dtype)
    got = getattr(twins, op)(x)
    assert got.dtype == dtype and got.shape == x.shape
    assert_close(got, want)


@pytest.mark.parametrize("op", UNARY)
def test_unary_twins_out_in_place_and_strided(op):
    base = _x(6, 2 * 40)
    x = base[:, :40]  # a channel slice: the twin takes it as it is
    want = REFERENCES[op](x.double()).float()
    out = torch.full((6, 40), float("nan"))
    assert getattr(twins, op)(x, out=out) is out
    assert_close(out, want)
    y = x.contiguous()
    assert getattr(twins, op)(y, out=y) is y  # in place
    assert_close(y, want)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(2,), (3, 8), (2, 3, 2 * 192), (5, 2 * 7), (0, 4)], ids=str)
def test_glu_twin_matches_torch(shape, dtype):
    x = _x(*shape, dtype=dtype)
    want = F.glu(x.double(), dim=-1).to(dtype)
    assert_close(twins.glu(x), want)
    assert_close(twins.glu(x, dim=x.dim() - 1), want)
    out = torch.empty(want.shape, dtype=dtype)
    assert twins.glu(x, out=out) is out
    assert_close(out, want)


def test_twins_refuse_like_the_ops():
    x = _x(4, 6)
    with pytest.raises(ValueError, match="even"):
        twins.glu(_x(4, 5))
    with pytest.raises(ValueError, match="last dimension"):
        twins.glu(x, dim=0)
    with pytest.raises(TypeError, match="dtype"):
        twins.gelu(torch.ones(3, dtype=torch.int32))
    with pytest.raises(ValueError, match="shape"):
        twins.swish(x, out=torch.empty(4, 5))
    with pytest.raises(TypeError, match="dtype"):
        twins.swish(x, out=torch.empty(4, 6, dtype=torch.float16))


def test_twin_extremes_follow_torch():
    x = torch.tensor([float("-inf"), -100.0, -1e-3, 0.0, 1e-3, 100.0, float("inf"), float("nan")])
    for op in ("sigmoid", "tanh", "relu"):
        torch.testing.assert_close(getattr(twins, op)(x), REFERENCES[op](x), equal_nan=True)
    assert torch.isnan(twins.relu(x)[-1])


# ---------------------------------------------------------------------------------------------
# validation of the public ops: refused in Python, before any module is built


def _call(op, x, **kwargs):
    return getattr(oasr_norm, op)(x, **kwargs)


@pytest.mark.parametrize("op", [*UNARY, "glu"])
def test_ops_refuse_bad_arguments_before_building(op, monkeypatch):
    x = cuda_looking(_x(4, 6))
    with no_module_builds(monkeypatch):
        with pytest.raises(ValueError, match=r"\.cuda\(\)"):
            _call(op, _x(4, 6))  # a real CPU tensor
        with pytest.raises(TypeError, match="dtype"):
            _call(op, cuda_looking(torch.ones(4, 6, dtype=torch.int32)))
        with pytest.raises(TypeError, match="dtype"):
            _call(op, cuda_looking(torch.ones(4, 6, dtype=torch.float64)))
        with pytest.raises(ValueError, match="unit stride"):
            _call(op, cuda_looking(_x(6, 4)).t())
        with pytest.raises(ValueError, match="uniformly strided rows"):
            _call(op, cuda_looking(_x(8, 3, 10))[::2])  # steps of 60 and 10 over 3 rows
        out_shape = (4, 3) if op == "glu" else (4, 6)
        with pytest.raises(ValueError, match="shape"):
            _call(op, x, out=cuda_looking(torch.empty(4, 5)))
        with pytest.raises(TypeError, match="dtype"):
            _call(op, x, out=cuda_looking(torch.empty(out_shape, dtype=torch.float16)))
        with pytest.raises(ValueError, match="contiguous"):
            _call(op, x, out=cuda_looking(torch.empty(out_shape[::-1])).t())
        with pytest.raises(ValueError, match="on cpu"):
            _call(op, x, out=torch.empty(out_shape))


def test_glu_refuses_odd_width_and_other_dims(monkeypatch):
    with no_module_builds(monkeypatch):
        with pytest.raises(ValueError, match="even"):
            oasr_norm.glu(cuda_looking(_x(4, 7)))
        for dim in (0, -2, 2):
            with pytest.raises(ValueError, match="last dimension"):
                oasr_norm.glu(cuda_looking(_x(4, 6)), dim=dim)
        with pytest.raises(TypeError, match="int"):
            oasr_norm.glu(cuda_looking(_x(4, 6)), dim=1.0)
        with pytest.raises(ValueError, match="at least 1"):
            oasr_norm.glu(cuda_looking(torch.tensor(1.0)))


def test_ops_are_registered_and_documented():
    for op in [*UNARY, "glu"]:
        fn = getattr(oasr_norm, op)
        assert fn.__doc__ and "Equivalent to" in fn.__doc__, op
        assert hasattr(fn, "__wrapped__"), f"{op} is not decorated with @oasr_api"
