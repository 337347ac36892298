"""GPU tests of the normalizations against their PyTorch twins: every op x dtype x width x rows,
strided inputs, ``out=``, the fused residual add (bit-exact sum), outputs poisoned first,
launcher-level refusals and CUDA-graph capture."""

from __future__ import annotations

import pytest
import torch
from norm_helpers import DTYPES, ROWS, WIDTHS, assert_close

import oasr_norm
from oasr_jit.testing import poison_, skip_unless_gpu
from oasr_norm import _jit, twins

pytestmark = skip_unless_gpu()


def _randn(*shape, dtype):
    return (torch.randn(*shape, device="cuda") * 2 + 0.3).to(dtype)


def _params(cols, dtype):
    return _randn(cols, dtype=dtype), _randn(cols, dtype=dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("cols", WIDTHS)
@pytest.mark.parametrize("rows", ROWS)
def test_layer_and_rms_norm(dtype, cols, rows):
    x = _randn(rows, cols, dtype=dtype)
    w, b = _params(cols, dtype)
    out = poison_(torch.empty_like(x))
    assert oasr_norm.layer_norm(x, w, b, 1e-5, out=out) is out
    assert_close(out, twins.layer_norm(x, w, b, 1e-5))
    assert_close(oasr_norm.layer_norm(x, None), twins.layer_norm(x, None))
    assert_close(oasr_norm.rms_norm(x, w, 1e-6), twins.rms_norm(x, w, 1e-6))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("cols", [7, 256, 1280, 20000])
@pytest.mark.parametrize("activation", ["swish", "relu", "gelu", "gelu_tanh", "sigmoid", "tanh",
                                        "swoosh_l", "swoosh_r"])  # fmt: skip
def test_norm_with_activation(dtype, cols, activation):
    x = _randn(33, cols, dtype=dtype)
    w, b = _params(cols, dtype)
    got = oasr_norm.layer_norm(x, w, b, activation=activation)
    assert_close(got, twins.layer_norm(x, w, b, activation=activation))
    got = oasr_norm.rms_norm(x, w, activation=activation)
    assert_close(got, twins.rms_norm(x, w, activation=activation))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("cols", WIDTHS)
@pytest.mark.parametrize("kind", ["layer", "rms"])
def test_add_norm_sum_is_bit_exact(dtype, cols, kind):
    x, r = _randn(257, cols, dtype=dtype), _randn(257, cols, dtype=dtype)
    w, b = _params(cols, dtype)
    if kind == "layer":
        y, s = oasr_norm.add_layer_norm(x, r, w, b)
        y_ref = twins.layer_norm(x + r, w, b)
    else:
        y, s = oasr_norm.add_rms_norm(x, r, w)
        y_ref = twins.rms_norm(x + r, w)
    assert torch.equal(s, x + r), "the stored sum must be torch.add's, bit for bit"
    assert_close(y, y_ref)


@pytest.mark.parametrize("dtype", DTYPES)
def test_add_norm_in_place_and_strided(dtype):
    base = _randn(64, 3, 1024, dtype=dtype)
    x = base[:, 0, :768]  # rows strided by 3 * 1024, a channel slice
    residual = _randn(64, 768, dtype=dtype)
    expected_sum = x + residual
    w = _randn(768, dtype=dtype)
    y, s = oasr_norm.add_rms_norm(x, residual, w, in_place=True)
    assert s is residual and torch.equal(residual, expected_sum)
    assert_close(y, twins.rms_norm(expected_sum, w))
    r_out = poison_(torch.empty(64, 768, device="cuda", dtype=dtype))
    out = poison_(torch.empty(64, 768, device="cuda", dtype=dtype))
    y, s = oasr_norm.add_layer_norm(x, expected_sum, w, None, out=out, residual_out=r_out)
    assert y is out and s is r_out and torch.equal(r_out, x + expected_sum)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("cols", [1, 7, 192, 384, 512, 2048, 20000])
def test_bias_norm(dtype, cols):
    x = _randn(4, 33, cols, dtype=dtype)
    bias = _randn(cols, dtype=dtype) * 0.1
    log_scale = torch.tensor(0.7, device="cuda", dtype=dtype)
    assert_close(oasr_norm.bias_norm(x, bias, log_scale), twins.bias_norm(x, bias, log_scale))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("cols", [1, 7, 80, 256, 512, 1024, 1280])
@pytest.mark.parametrize("activation", [None, "swish"])
def test_batch_norm1d(dtype, cols, activation):
    x = _randn(8, 125, cols, dtype=dtype)
    mean, w, b = _randn(cols, dtype=dtype), *_params(cols, dtype)
    var = _randn(cols, dtype=dtype).abs() + 0.2
    out = poison_(torch.empty_like(x))
    oasr_norm.batch_norm1d(x, mean, var, w, b, activation=activation, out=out)
    assert_close(out, twins.batch_norm1d(x, mean, var, w, b, activation=activation))
    strided = _randn(8, 125, cols + 8, dtype=dtype)[..., 8:]
    assert_close(oasr_norm.batch_norm1d(strided, mean, var), twins.batch_norm1d(strided, mean, var))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape, groups", [((2, 32, 250), 8), ((3, 12, 7, 5), 4), ((1, 6, 2), 3),
                                           ((4, 64, 33), 32)])  # fmt: skip
def test_group_norm(dtype, shape, groups):
    x = _randn(*shape, dtype=dtype)
    w, b = _params(shape[1], dtype)
    assert_close(oasr_norm.group_norm(x, groups, w, b), twins.group_norm(x, groups, w, b))
    assert_close(oasr_norm.group_norm(x, groups), twins.group_norm(x, groups))


@pytest.mark.parametrize("dtype", DTYPES)
def test_n_d_strided_inputs(dtype):
    base = _randn(4, 50, 640, dtype=dtype)
    for view in (base[..., :512], base[:, ::2], base[..., 128:]):
        w, b = _params(view.shape[-1], dtype)
        assert_close(oasr_norm.layer_norm(view, w, b), twins.layer_norm(view, w, b))
    with pytest.raises(ValueError, match="uniformly strided rows"):
        oasr_norm.layer_norm(base.transpose(0, 1)[:, ::2], None)


def test_empty_input_launches_nothing():
    x = torch.empty(0, 512, device="cuda", dtype=torch.float16)
    assert oasr_norm.layer_norm(x, None).shape == (0, 512)
    assert (
        oasr_norm.batch_norm1d(x, *[torch.ones(512, device="cuda", dtype=x.dtype)] * 2).numel() == 0
    )


def test_launcher_refusals_leave_the_context_healthy():
    module = _jit.row_norm_module("layer", "fp16")
    x = _randn(4, 64, dtype=torch.float16)
    out = torch.empty_like(x)
    with pytest.raises(ValueError, match="CUDA tensor"):
        module.row_norm(out.cpu(), None, x, None, None, None, None, None, 0, 1e-5, 0)
    with pytest.raises(ValueError, match="x is on device"):
        module.row_norm(out, None, x.cpu(), None, None, None, None, None, 0, 1e-5, 0)
    with pytest.raises(TypeError, match="must have the same dtype"):
        module.row_norm(out.float(), None, x, None, None, None, None, None, 0, 1e-5, 0)
    with pytest.raises(ValueError, match="shares storage"):
        module.row_norm(x, None, x, None, None, None, None, None, 0, 1e-5, 0)
    with pytest.raises(ValueError, match="weight must have 64 elements"):
        module.row_norm(out, None, x, None, x[0, :8], None, None, None, 0, 1e-5, 0)
    with pytest.raises(ValueError, match="unknown activation"):
        module.row_norm(out, None, x, None, None, None, None, None, 0, 1e-5, 42)
    with pytest.raises(ValueError, match="oasr_norm_layer_fp16 holds norm kind 0, not 2"):
        module.row_norm(out, None, x, None, None, None, None, None, 2, 1e-5, 0)
    with pytest.raises(ValueError, match="has no fused activation"):
        module.row_norm(out, None, x, None, None, None, None, None, 0, 1e-5, 1)
    with pytest.raises(ValueError, match="takes no residual"):
        module.row_norm(out, out.clone(), x, x.clone(), None, None, None, None, 0, 1e-5, 0)
    with pytest.raises(TypeError, match="another dtype"):
        module.row_norm(out.float(), None, x.float(), None, None, None, None, None, 0, 1e-5, 0)
    bias = _jit.row_norm_module("bias", "fp16")
    with pytest.raises(ValueError, match="BiasNorm needs"):
        bias.row_norm(out, None, x, None, None, None, None, None, 2, 1e-5, 0)
    channels = _jit.module("channels")
    with pytest.raises(ValueError, match="groups must divide"):
        channels.group_norm(out, x, None, None, 3, 1e-5)
    y = oasr_norm.layer_norm(x, None)
    torch.cuda.synchronize()
    assert_close(y, twins.layer_norm(x, None))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_cuda_graph_capture(dtype):
    x, r = _randn(500, 512, dtype=dtype), _randn(500, 512, dtype=dtype)
    w, b = _params(512, dtype)
    mean, var = _randn(512, dtype=dtype), _randn(512, dtype=dtype).abs() + 0.1
    g = _randn(2, 32, 64, dtype=dtype)
    outs = {}

    def step():
        outs["ln"] = oasr_norm.layer_norm(x, w, b, activation="swish")
        outs["add"] = oasr_norm.add_rms_norm(x, r, w)
        outs["bias"] = oasr_norm.bias_norm(x, b, w[:1])
        outs["bn"] = oasr_norm.batch_norm1d(x, mean, var, w, b)
        outs["gn"] = oasr_norm.group_norm(g, 8, w[:32], b[:32])

    step()  # warm: builds and loads every module outside the capture
    graph = torch.cuda.CUDAGraph()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side), torch.cuda.graph(graph, stream=side):
        step()
    torch.cuda.current_stream().wait_stream(side)
    for _ in range(2):
        for t in (x, r, g):
            t.copy_(torch.randn_like(t))
        graph.replay()
        torch.cuda.synchronize()
        assert_close(outs["ln"], twins.layer_norm(x, w, b, activation="swish"))
        assert_close(outs["add"][0], twins.rms_norm(x + r, w))
        assert_close(outs["bias"], twins.bias_norm(x, b, w[:1]))
        assert_close(outs["bn"], twins.batch_norm1d(x, mean, var, w, b))
        assert_close(outs["gn"], twins.group_norm(g, 8, w[:32], b[:32]))


def test_layers_use_the_kernels_under_no_grad():
    from oasr_norm import layers

    ln = layers.LayerNorm(256, activation="swish").cuda().half()
    x = _randn(10, 256, dtype=torch.float16)
    with torch.no_grad():
        assert_close(ln(x), twins.layer_norm(x, ln.weight, ln.bias, activation="swish"))
    # With autograd the twin serves (the kernels have no backward).
    y = ln(x.requires_grad_())
    y.float().sum().backward()
    assert x.grad is not None
