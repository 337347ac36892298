"""The sm90 kernels on the GPU: every production variant against an fp32 reference on odd M,
K not a multiple of the 64-wide K tile, N at the alignment edge; bias, matrix C and every
activation; row strides; batch invariance (bitwise); refusals; CUDA-graph capture."""

from __future__ import annotations

import pytest
import torch

import oasr_gemm
from oasr_gemm import _jit, configs
from oasr_gemm.gemm import ACTIVATIONS, _run
from oasr_jit.testing import skip_unless_gpu

pytestmark = skip_unless_gpu()

DTYPES = [torch.float16, torch.bfloat16]
# (M, N, K): odd and tiny M, K residues of the 64-wide tile, N at the 8-element edge, ASR sizes
SHAPES = [
    (1, 8, 8),
    (7, 24, 72),
    (33, 136, 200),
    (250, 512, 256),
    (1000, 1032, 520),
    (8000, 256, 1024),
]


_ACT = {
    "identity": lambda y: y,
    "relu": torch.relu,
    "swish": torch.nn.functional.silu,
    "gelu": torch.nn.functional.gelu,
    "gelu_tanh": lambda y: torch.nn.functional.gelu(y, approximate="tanh"),
}


def _ref(A, B, C=None, act="identity"):
    """fp32 (no TF32): A · Bᵀ + C, then the activation."""
    y = A.float() @ B.float().T
    if C is not None:
        y = y + C.float()
    return _ACT[act](y)


def _inputs(M, N, K, dtype, seed=0):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    A = torch.randn(M, K, device="cuda", generator=gen).to(dtype)
    B = (torch.randn(N, K, device="cuda", generator=gen) / K**0.5).to(dtype)
    bias = torch.randn(N, device="cuda", generator=gen).to(dtype)
    return A, B, bias


def _assert_close(got, want, dtype):
    tol = 1e-2 if dtype == torch.float16 else 4e-2
    torch.testing.assert_close(got.float(), want, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("config", configs.production_configs(), ids=lambda c: c.id)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_every_production_variant(config, shape, dtype):
    M, N, K = shape
    A, B, bias = _inputs(M, N, K, dtype)
    out = torch.full((M, N), float("nan"), device="cuda", dtype=dtype)
    _run(config, dtype, out, A, B, bias, None, "identity")
    _assert_close(out, _ref(A, B, bias), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("act", [a for a in ACTIVATIONS if a != "identity"])
@pytest.mark.parametrize("config", configs.production_configs(), ids=lambda c: c.id)
def test_every_production_variant_with_each_activation(config, act, dtype):
    M, N, K = 300, 264, 200  # a partial tile in M and N, K not a multiple of the tile's
    A, B, bias = _inputs(M, N, K, dtype, seed=4)
    out = torch.full((M, N), float("nan"), device="cuda", dtype=dtype)
    _run(config, dtype, out, A, B, bias, None, act)
    _assert_close(out, _ref(A, B, bias, act), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("act", ACTIVATIONS)
def test_epilogues(act, dtype):
    M, N, K = 77, 264, 136
    A, B, bias = _inputs(M, N, K, dtype, seed=1)
    matrix = torch.randn(M, N, device="cuda").to(dtype)
    for C in (None, bias, matrix):
        got = oasr_gemm.gemm_activation(A, B, C, activation=act, backend="oasr")
        _assert_close(got, _ref(A, B, C, act), dtype)


def _ordered(t):
    """A 16-bit tensor's values as integers whose neighbours differ by one (ulp distances)."""
    bits = t.view(torch.int16).int()
    return torch.where(bits < 0, -(bits & 0x7FFF), bits)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("config", configs.production_configs(), ids=lambda c: c.id)
def test_gelu_is_within_an_ulp_of_float64(config, dtype):
    # Accumulators over about [-14, 14]: the normal tail (x < -4), where 0.5 x (1 + erf(x / sqrt 2))
    # cancels, and past -13.2, where the epilogue's exponential flushes to 0
    M, N, K = 512, 264, 256
    A, B, bias = _inputs(M, N, K, dtype, seed=5)
    B = (B.float() * 4).to(dtype)
    out = torch.full((M, N), float("nan"), device="cuda", dtype=dtype)
    _run(config, dtype, out, A, B, bias, None, "gelu")
    x = A.double() @ B.double().T + bias.double()
    want = 0.5 * x * torch.special.erfc(-x / 2**0.5)
    assert (x < -4).sum() > 1000 and (x < -13.2).any()
    # Near 0 the fp32 accumulator's rounding (~1e-6) is many ulps of a tiny GELU: compare
    # absolutely there. From -13.2 GELU is below the smallest normal float; the epilogue gives 0.
    ulps = (_ordered(out) - _ordered(want.to(dtype))).abs()
    ranged = (x.abs() >= 0.25) & (x >= -13)
    assert ulps[ranged].max() <= 1, f"{int((ulps[ranged] > 1).sum())} outputs off by over an ulp"
    near_zero = x.abs() < 0.25
    one_ulp = 2**-10 if dtype == torch.float16 else 2**-7
    got, close = out.double()[near_zero], want[near_zero]
    torch.testing.assert_close(got, close, rtol=one_ulp, atol=1e-5)
    assert out.double()[x < -13.2].abs().max() < 2**-126


def test_nd_inputs_strided_rows_and_out():
    dtype = torch.float16
    wide = torch.randn(3, 50, 264, device="cuda", dtype=dtype)
    A = wide[..., :256]  # rows 264 apart: a channel slice, no copy
    B = torch.randn(128, 256, device="cuda", dtype=dtype) / 16
    out = torch.full((3, 50, 128), float("nan"), device="cuda", dtype=dtype)
    rows = A.reshape(150, 256)  # still a view: uniform row stride 264
    assert rows.data_ptr() == A.data_ptr()
    assert oasr_gemm.gemm(rows, B, out=out.view(150, 128), backend="oasr") is not None
    _assert_close(out.view(150, 128), _ref(rows, B), dtype)
    x = torch.randn(2, 5, 64, device="cuda", dtype=dtype)
    assert oasr_gemm.gemm(x, B[:, :64].contiguous(), backend="oasr").shape == (2, 5, 128)


def test_batch_invariance_is_bitwise():
    dtype = torch.bfloat16
    A, B, bias = _inputs(4096, 512, 512, dtype, seed=2)
    full = oasr_gemm.gemm(A, B, bias, batch_invariant=True)
    for m in (1, 7, 128, 1000):
        part = oasr_gemm.gemm(A[:m], B, bias, batch_invariant=True)
        assert torch.equal(part, full[:m]), m


def test_refusals():
    dtype = torch.float16
    A, B, _ = _inputs(16, 64, 64, dtype)
    with pytest.raises(ValueError, match="multiple of 8"):
        oasr_gemm.gemm(A[:, :60], B[:, :60])
    with pytest.raises(ValueError, match="N = 60"):
        oasr_gemm.gemm(A, B[:60])
    with pytest.raises(ValueError, match="move it"):
        oasr_gemm.gemm(A, B.cpu())
    with pytest.raises(ValueError, match="contiguous"):
        oasr_gemm.gemm(A, B.T.contiguous().T)
    # the module re-checks what the API checked: a direct call raises, nothing faults
    module = _jit.production_module()
    fn = getattr(module, _jit.function_name(configs.DEFAULT, "fp16"))
    with pytest.raises(ValueError):
        fn(torch.empty(16, 60, device="cuda", dtype=dtype), A, B[:60], None, None)
    torch.cuda.synchronize()


def test_graph_capture():
    dtype = torch.float16
    A, B, bias = _inputs(300, 256, 128, dtype, seed=3)
    out = torch.empty(300, 256, device="cuda", dtype=dtype)
    oasr_gemm.gemm_activation(A, B, bias, activation="gelu", out=out)  # builds, selects
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=side):
        oasr_gemm.gemm_activation(A, B, bias, activation="gelu", out=out)
    out.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    _assert_close(out, _ref(A, B, bias, "gelu"), dtype)
