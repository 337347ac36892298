"""CPU tests of the norm ops: the PyTorch twins against independent float64 references,
argument validation (which must refuse before any module is built), `fold_batch_norm`, the
layers' CPU path and state-dict compatibility, and the family's registration."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from norm_helpers import DTYPES, assert_close

import oasr_norm
from oasr_norm import layers, twins

torch.manual_seed(0)


def _x(*shape, dtype=torch.float32):
    return (torch.randn(*shape, dtype=torch.float64) * 2 + 0.5).to(dtype)


# ---------------------------------------------------------------------------------------------
# twins vs float64 references


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(5, 7), (2, 3, 64), (4, 1280), (1, 1)])
def test_layer_and_rms_twins(dtype, shape):
    x = _x(*shape, dtype=dtype)
    w, b = _x(shape[-1], dtype=dtype), _x(shape[-1], dtype=dtype)
    xd = x.double()
    mean = xd.mean(-1, keepdim=True)
    var = xd.var(-1, unbiased=False, keepdim=True)
    ref = ((xd - mean) / torch.sqrt(var + 1e-5) * w.double() + b.double()).to(dtype)
    assert_close(twins.layer_norm(x, w, b, 1e-5), ref)
    ref = (xd / torch.sqrt(xd.pow(2).mean(-1, keepdim=True) + 1e-6) * w.double()).to(dtype)
    assert_close(twins.rms_norm(x, w, 1e-6), ref)


@pytest.mark.parametrize("dtype", DTYPES)
def test_add_norm_twins_round_the_sum_like_torch_add(dtype):
    x, r = _x(6, 256, dtype=dtype), _x(6, 256, dtype=dtype)
    w = _x(256, dtype=dtype)
    y, s = twins.add_layer_norm(x, r, w, None)
    assert torch.equal(s, x + r)
    assert_close(y, twins.layer_norm(x + r, w, None))
    r2 = r.clone()
    y2, s2 = twins.add_rms_norm(x, r2, w, in_place=True)
    assert s2 is r2 and torch.equal(r2, x + r)
    assert_close(y2, twins.rms_norm(x + r, w))


def test_bias_norm_twin_is_icefalls_formula():
    x = _x(4, 9, 192)
    bias, log_scale = _x(192) * 0.1, torch.tensor(0.3)
    xd = x.double()
    scales = (xd - bias.double()).pow(2).mean(-1, keepdim=True).pow(-0.5) * log_scale.double().exp()
    assert_close(twins.bias_norm(x, bias, log_scale), (xd * scales).float())


def test_batch_and_group_norm_twins():
    x = _x(3, 50, 24)
    mean, var = _x(24), _x(24).abs() + 0.1
    w, b = _x(24), _x(24)
    ref = F.batch_norm(x.transpose(1, 2), mean, var, w, b, training=False, eps=1e-5)
    assert_close(twins.batch_norm1d(x, mean, var, w, b, 1e-5), ref.transpose(1, 2))
    ref = F.silu(ref)
    assert_close(twins.batch_norm1d(x, mean, var, w, b, activation="swish"), ref.transpose(1, 2))
    g = _x(2, 12, 5, 3)
    assert_close(twins.group_norm(g, 4, w[:12], b[:12]), F.group_norm(g, 4, w[:12], b[:12]))


@pytest.mark.parametrize(
    "activation, fn",
    [("swish", F.silu), ("relu", torch.relu), ("gelu", F.gelu), ("tanh", torch.tanh),
     ("sigmoid", torch.sigmoid), ("gelu_tanh", lambda t: F.gelu(t, approximate="tanh"))],
)  # fmt: skip
def test_norm_activation_twins(activation, fn):
    x, w = _x(4, 33), _x(33)
    assert_close(twins.layer_norm(x, w, None, activation=activation), fn(twins.layer_norm(x, w)))


# ---------------------------------------------------------------------------------------------
# validation: every refusal happens in Python, before a module is built


def test_cpu_tensor_is_refused_with_the_fix():
    x = _x(4, 8)
    with pytest.raises(ValueError, match=r"CUDA tensor.*\.cuda\(\).*oasr_norm\.twins"):
        oasr_norm.layer_norm(x, None)


@pytest.mark.parametrize(
    "call, error, pattern",
    [
        (lambda x: oasr_norm.layer_norm(x.int(), None), TypeError, "supported: float32"),
        (lambda x: oasr_norm.layer_norm(x.t(), None), ValueError, "unit stride"),
        (lambda x: oasr_norm.layer_norm(x, x[0, :4]), ValueError, r"weight must have shape \(8,\)"),
        (lambda x: oasr_norm.layer_norm(x, x[0].half()), TypeError, "cast it"),
        (lambda x: oasr_norm.layer_norm(x, None, activation="mish"), ValueError, "activation"),
        (lambda x: oasr_norm.layer_norm(x, None, out=x[:2]), ValueError, "out must have shape"),
        (lambda x: oasr_norm.add_layer_norm(x, x[:1], None), ValueError, "residual must have"),
        (lambda x: oasr_norm.add_rms_norm(x, x, None, residual_out=x, in_place=True), ValueError,
         "not both"),
        (lambda x: oasr_norm.bias_norm(x, x[0], x[0]), ValueError, "one-element"),
        (lambda x: oasr_norm.group_norm(x, 3), ValueError, "positive divisor"),
        (lambda x: oasr_norm.batch_norm1d(x, None, x[0]), ValueError, "running_mean is required"),
    ],
)  # fmt: skip
def test_bad_arguments(call, error, pattern, monkeypatch):
    from oasr_norm import _jit

    monkeypatch.setattr(_jit, "module", lambda kind: pytest.fail("validation must come first"))
    x = _x(4, 8)
    # CPU tensors posing as CUDA ones (the checks read .device), so the checks after the device
    # check run without a GPU; none of these calls reaches an allocation or a kernel.
    monkeypatch.setattr(torch.Tensor, "device", property(lambda self: torch.device("cuda", 0)))
    with pytest.raises(error, match=pattern):
        call(x)


# ---------------------------------------------------------------------------------------------
# fold_batch_norm


def test_fold_batch_norm_into_a_pointwise_conv():
    conv = torch.nn.Conv1d(16, 24, 1).double()
    bn = torch.nn.BatchNorm1d(24).double().eval()
    bn.running_mean.normal_()
    bn.running_var.uniform_(0.5, 2.0)
    bn.weight.data.normal_()
    bn.bias.data.normal_()
    x = torch.randn(2, 16, 30, dtype=torch.float64)
    w, b = oasr_norm.fold_batch_norm(conv.weight, conv.bias, bn.running_mean, bn.running_var,
                                     bn.weight, bn.bias, bn.eps)  # fmt: skip
    torch.testing.assert_close(F.conv1d(x, w, b), bn(conv(x)))
    w, b = oasr_norm.fold_batch_norm(conv.weight, None, bn.running_mean, bn.running_var)
    ref = (F.conv1d(x, conv.weight) - bn.running_mean[:, None]) / torch.sqrt(
        bn.running_var[:, None] + 1e-5
    )
    torch.testing.assert_close(F.conv1d(x, w, b), ref)


# ---------------------------------------------------------------------------------------------
# layers: the CPU path is the twin, and torch state dicts load


def test_layer_norm_layer_loads_torch_state_dict():
    ref = torch.nn.LayerNorm(48)
    ref.weight.data.normal_()
    ref.bias.data.normal_()
    ours = layers.LayerNorm(48)
    ours.load_state_dict(ref.state_dict())
    x = _x(3, 5, 48)
    assert_close(ours(x), ref(x))
    y, s = ours.forward_add(x, x)
    assert torch.equal(s, x + x)
    assert_close(y, ref(x + x))


def test_rms_bias_batch_group_layers_on_cpu():
    rms = layers.RMSNorm(32)
    torch.nn.init.normal_(rms.weight)
    ref = torch.nn.RMSNorm(32, eps=1e-6)
    ref.load_state_dict(rms.state_dict())
    x = _x(7, 32)
    assert_close(rms(x), ref(x))

    bias_norm = layers.BiasNorm(32)
    assert set(bias_norm.state_dict()) == {"bias", "log_scale"}
    assert_close(bias_norm(x), twins.bias_norm(x, bias_norm.bias, bias_norm.log_scale))

    bn = layers.BatchNormChannelsLast(32, activation="swish").eval()
    bn.running_mean.normal_()
    bn.running_var.uniform_(0.5, 2)
    ref = torch.nn.BatchNorm1d(32).eval()
    ref.load_state_dict(bn.state_dict())
    seq = _x(2, 9, 32)
    assert_close(bn(seq), F.silu(ref(seq.transpose(1, 2))).transpose(1, 2))

    gn = layers.GroupNorm(4, 32)
    ref = torch.nn.GroupNorm(4, 32)
    ref.load_state_dict(gn.state_dict())
    img = _x(2, 32, 6)
    assert_close(gn(img), ref(img))


# ---------------------------------------------------------------------------------------------


def test_family_registration_and_reexports():
    import oasr
    import oasr_jit

    family = oasr_jit.discover_families()["norm"]
    assert family.module == "oasr_norm" and family.version == oasr_norm.__version__
    assert set(family.exports) == set(oasr_norm._family.OPS), "one list of public names"
    for name in family.exports:
        assert callable(getattr(oasr_norm, name)), name
        assert getattr(oasr, name) is getattr(oasr_norm, name)
    assert (family.include_dir / "oasr" / "norm" / "row_norm.cuh").is_file()


def test_registration_does_not_import_torch():
    import subprocess
    import sys

    code = "import sys, oasr_jit; oasr_jit.discover_families(); print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
