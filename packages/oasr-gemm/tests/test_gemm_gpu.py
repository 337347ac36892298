"""The sm90 kernels on the GPU: every production variant against an fp32 reference on odd M,
K not a multiple of the 64-wide K tile, N at the alignment edge; bias, matrix C and every
activation; Swish and tanh-GELU within an ulp of float64, their paired columns kept to their
rows; row strides; batch invariance (bitwise); refusals; CUDA-graph capture."""

from __future__ import annotations

import pytest
import torch

import oasr_gemm
from oasr_gemm import _jit, configs
from oasr_gemm.dense import ACTIVATIONS, _run
from oasr_jit.testing import skip_unless_gpu

pytestmark = skip_unless_gpu()

#: the GPU's architecture, whose production configs are tested (sm_90's where there is no GPU:
#: collection only, every test is skipped)
ARCH = "{}.{}".format(*torch.cuda.get_device_capability()) if torch.cuda.is_available() else "9.0a"

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
@pytest.mark.parametrize("config", configs.production_configs(ARCH), ids=lambda c: c.id)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_every_production_variant(config, shape, dtype):
    M, N, K = shape
    A, B, bias = _inputs(M, N, K, dtype)
    out = torch.full((M, N), float("nan"), device="cuda", dtype=dtype)
    _run(config, dtype, out, A, B, bias, None, "identity")
    _assert_close(out, _ref(A, B, bias), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("act", [a for a in ACTIVATIONS if a != "identity"])
@pytest.mark.parametrize("config", configs.production_configs(ARCH), ids=lambda c: c.id)
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
    # (a matrix C with each activation would build every activation's kernels with C: ten
    # modules; test_every_production_variant_adds_a_matrix_c has identity and Swish)
    for C in (None, bias, matrix) if act in ("identity", "swish") else (None, bias):
        got = oasr_gemm.gemm_activation(A, B, C, activation=act, backend="oasr")
        _assert_close(got, _ref(A, B, C, act), dtype)


def _ordered(t):
    """A 16-bit tensor's values as integers whose neighbours differ by one (ulp distances)."""
    bits = t.view(torch.int16).int()
    return torch.where(bits < 0, -(bits & 0x7FFF), bits)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("config", configs.production_configs(ARCH), ids=lambda c: c.id)
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


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("config", configs.production_configs(ARCH), ids=lambda c: c.id)
def test_every_production_variant_adds_a_matrix_c(config, dtype):
    # sm90: the kernels built to add C (gemm_sm90_template.cuh); sm80: one source, C or a bias
    M, N, K = 300, 264, 200
    A, B, bias = _inputs(M, N, K, dtype, seed=6)
    C = torch.randn(M, N, device="cuda").to(dtype)
    if config.lane == configs.SM80_LANE:
        bias = None
    for act in ("identity", "swish"):
        out = torch.full((M, N), float("nan"), device="cuda", dtype=dtype)
        _run(config, dtype, out, A, B, bias, C, act)
        _assert_close(out, _ref(A, B, C if bias is None else C.float() + bias.float(), act), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("act", ["swish", "gelu_tanh"])
@pytest.mark.parametrize("config", configs.production_configs(ARCH), ids=lambda c: c.id)
def test_sigmoid_epilogues_are_within_an_ulp_of_float64(config, act, dtype):
    # x * sigmoid(z) with one reciprocal for two columns (gemm_activation.cuh): accumulators
    # over about [-60, 60], so past -43.7, where the shared reciprocal's exponent is clamped
    M, N, K = 512, 264, 256
    A, B, bias = _inputs(M, N, K, dtype, seed=7)
    B = (B.float() * 16).to(dtype)
    out = torch.full((M, N), float("nan"), device="cuda", dtype=dtype)
    _run(config, dtype, out, A, B, bias, None, act)
    x = A.double() @ B.double().T + bias.double()
    z = x if act == "swish" else 2 * 0.7978845608028654 * (x + 0.044715 * x**3)
    want = x * torch.sigmoid(z)
    assert (z < -43.7).sum() > 100
    ulps = (_ordered(out) - _ordered(want.to(dtype))).abs()
    ranged = (x.abs() >= 0.25) & (z >= -43.6)
    assert ulps[ranged].max() <= 1, f"{int((ulps[ranged] > 1).sum())} outputs off by over an ulp"
    near_zero = x.abs() < 0.25
    one_ulp = 2**-10 if dtype == torch.float16 else 2**-7
    torch.testing.assert_close(out.double()[near_zero], want[near_zero], rtol=one_ulp, atol=1e-5)
    # past z = -43.7 the factor is 2^-63 where e^z is meant: x 1.1e-19 at most
    far = z < -43.7
    assert (out.double()[far].abs() <= x[far].abs() * 2**-62).all()


@pytest.mark.parametrize("act", ["swish", "gelu_tanh"])
@pytest.mark.parametrize("config", configs.production_configs(ARCH), ids=lambda c: c.id)
def test_paired_columns_keep_rows_and_nans_apart(config, act):
    """The pairs that share a reciprocal lie in one row: changing one row of A leaves every other
    row's bits; a NaN column does not reach the column it is paired with."""
    dtype = torch.bfloat16
    M, N, K = 200, 136, 72
    A, B, bias = _inputs(M, N, K, dtype, seed=8)
    out = torch.empty(M, N, device="cuda", dtype=dtype)
    _run(config, dtype, out, A, B, bias, None, act)
    changed = A.clone()
    changed[77] = torch.randn(K, device="cuda").to(dtype)
    again = torch.full_like(out, float("nan"))
    _run(config, dtype, again, changed, B, bias, None, act)
    others = torch.arange(M, device="cuda") != 77
    assert torch.equal(again[others], out[others])
    assert not torch.equal(again[77], out[77])
    nan_b = B.clone()
    nan_b[40, 3] = float("nan")
    _run(config, dtype, again, A, nan_b, bias, None, act)
    assert again[:, 40].isnan().all()
    assert not again[:, 41].isnan().any()  # 40's partner (39's is 38)
    _assert_close(again[:, 41], _ref(A, B, bias, act)[:, 41], dtype)


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


@pytest.mark.parametrize("act", ["identity", "swish"])
def test_batch_invariance_is_bitwise(act):
    dtype = torch.bfloat16
    A, B, bias = _inputs(4096, 512, 512, dtype, seed=2)
    full = oasr_gemm.gemm_activation(A, B, bias, activation=act, batch_invariant=True)
    for m in (1, 7, 128, 1000):
        part = oasr_gemm.gemm_activation(A[:m], B, bias, activation=act, batch_invariant=True)
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
    default = configs.default_config(ARCH)
    module = _jit.config_module(default, "fp16")
    fn_name = _jit.function_name(default, "fp16")
    fn = getattr(module, fn_name)
    if default.lane == configs.SM80_LANE:  # no sm90 lane on this GPU: sm80 signature
        with pytest.raises(ValueError):
            fn(torch.empty(16, 60, device="cuda", dtype=dtype), A, B[:60], None, None, None)
        return
    with pytest.raises(ValueError):
        fn(torch.empty(16, 60, device="cuda", dtype=dtype), A, B[:60], None, None)
    out = torch.empty(16, 64, device="cuda", dtype=dtype)
    with pytest.raises(ValueError, match=f"without a matrix C and got one: call {fn_name}_c"):
        fn(out, A, B, None, out.clone())
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
