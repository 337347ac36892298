"""The API without a GPU: argument checks (each names the fix) and the PyTorch twins against a
float64 reference."""

from __future__ import annotations

import pytest
import torch

import oasr_gemm
from oasr_gemm import twins


def _ref(A, B, C=None, act="identity"):
    y = A.double() @ B.double().T
    if C is not None:
        y = y + C.double()
    f = {
        "identity": lambda v: v,
        "relu": torch.relu,
        "swish": lambda v: v * torch.sigmoid(v),
        "gelu": lambda v: 0.5 * v * (1 + torch.erf(v / 2**0.5)),
        "gelu_tanh": lambda v: 0.5 * v * (1 + torch.tanh(0.7978845608 * (v + 0.044715 * v**3))),
    }[act]
    return f(y)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("act", twins.activation_names())
def test_twins_match_float64(dtype, act):
    gen = torch.Generator().manual_seed(0)
    A = torch.randn(2, 7, 40, generator=gen).to(dtype)
    B = (torch.randn(24, 40, generator=gen) / 6).to(dtype)
    bias = torch.randn(24, generator=gen).to(dtype)
    matrix = torch.randn(2, 7, 24, generator=gen).to(dtype)
    for C in (None, bias, matrix):
        got = oasr_gemm.gemm_activation(A, B, C, activation=act, backend="torch")
        assert got.shape == (2, 7, 24) and got.dtype == dtype
        tol = 2e-2 if dtype == torch.float16 else 8e-2
        torch.testing.assert_close(got.double(), _ref(A, B, C, act), rtol=tol, atol=tol)
    for C in (None, bias, matrix):  # gemm with out=: cuBLAS writes out itself
        out = torch.full((2, 7, 24), float("nan"), dtype=dtype)
        assert oasr_gemm.gemm(A, B, C, out=out, backend="torch") is out
        torch.testing.assert_close(out.double(), _ref(A, B, C), rtol=3e-2, atol=3e-2)


def test_refusals_name_the_fix():
    A = torch.randn(4, 16).half()
    B = torch.randn(8, 16).half()
    with pytest.raises(ValueError, match=r"A must be a CUDA tensor.*backend='torch'"):
        oasr_gemm.gemm(A, B)
    with pytest.raises(ValueError, match=r"C.clone\(\)"):
        oasr_gemm.gemm(A, B, torch.randn(9).half()[1:])  # starts 2 bytes into its storage
    with pytest.raises(TypeError, match="float16 or bfloat16"):
        oasr_gemm.gemm(A.float(), B.float(), backend="torch")
    with pytest.raises(TypeError, match="cast it"):
        oasr_gemm.gemm(A, B.bfloat16(), backend="torch")
    with pytest.raises(ValueError, match="differ in K"):
        oasr_gemm.gemm(A, B[:, :8], backend="torch")
    with pytest.raises(ValueError, match="bias"):
        oasr_gemm.gemm(A, B, torch.randn(9).half(), backend="torch")
    with pytest.raises(ValueError, match="neither a bias"):
        oasr_gemm.gemm(A, B, torch.randn(4, 9).half(), backend="torch")
    with pytest.raises(ValueError, match="activation must be one of"):
        oasr_gemm.gemm_activation(A, B, activation="tanh", backend="torch")
    with pytest.raises(ValueError, match="backend must be one of"):
        oasr_gemm.gemm(A, B, backend="cublas")
    with pytest.raises(ValueError, match="out must be a contiguous"):
        oasr_gemm.gemm(A, B, out=torch.empty(4, 9).half(), backend="torch")
    with pytest.raises(TypeError, match="torch.Tensor"):
        oasr_gemm.gemm(A.numpy(), B, backend="torch")


def test_an_out_that_aliases_an_input_still_gets_the_product():
    """The twin writes out directly only when out shares no memory with A, B or C."""
    gen = torch.Generator().manual_seed(1)
    A = torch.randn(16, 16, generator=gen).half()
    B = (torch.randn(16, 16, generator=gen) / 4).half()
    C = torch.randn(16, 16, generator=gen).half()
    for target in ("A", "B", "C"):
        a, b, c = A.clone(), B.clone(), C.clone()
        want = _ref(a, b, c)
        out = {"A": a, "B": b, "C": c}[target]
        got = oasr_gemm.gemm(a, b, c, out=out, backend="torch")
        assert got is out
        torch.testing.assert_close(got.double(), want, rtol=3e-2, atol=3e-2)


def test_an_sm80_variant_gets_the_workspace_it_asks_for(monkeypatch):
    """`_run` asks an sm80 variant its workspace size once per shape, allocates exactly that (or
    passes none) and calls the variant with it; an sm90 variant gets no workspace argument."""
    from oasr_gemm import configs
    from oasr_gemm import dense as gemm

    calls, asked = [], []

    def fake_kernel(config, dtype, activation, with_c=False):
        return lambda *args: calls.append((config.id, with_c, args))

    def fake_size(config, dtype, activation, M, N, K, device):
        asked.append((config.id, M, N, K))
        return {"none": 0, "parallel": 4 * M * N * config.slices}[config.split]

    monkeypatch.setattr(gemm, "_kernel", fake_kernel)
    monkeypatch.setattr(gemm, "_workspace_bytes", fake_size)
    A, B = torch.randn(5, 16).half(), torch.randn(24, 16).half()
    out = torch.empty(5, 24).half()
    split = configs.Sm80Config(64, 64, 64, 32, 32, 3, "parallel", 4)
    plain = configs.Sm80Config(64, 64, 64, 32, 32, 3)
    gemm._run(split, torch.float16, out, A, B, None, None, "identity")
    gemm._run(plain, torch.float16, out, A, B, None, None, "swish")
    gemm._run(configs.DEFAULT, torch.float16, out, A, B, None, None, "identity")
    C = torch.randn(5, 24).half()  # sm90 kernels with C are their own; sm80's take it at run time
    gemm._run(configs.DEFAULT, torch.float16, out, A, B, None, C, "identity")
    gemm._run(plain, torch.float16, out, A, B, None, C, "identity")
    assert asked == [(split.id, 5, 24, 16), (plain.id, 5, 24, 16), (plain.id, 5, 24, 16)]
    (_, _, with_split), (_, _, with_plain), (_, no_c, sm90), (_, c90, _), (_, c80, _) = calls
    assert with_split[-1].dtype == torch.uint8 and with_split[-1].numel() == 4 * 5 * 24 * 4
    assert with_plain[-1] is None and len(with_plain) == 6
    assert len(sm90) == 5
    assert (no_c, c90, c80) == (False, True, False)


def test_no_public_name_is_a_submodule_and_every_op_has_a_full_docstring():
    """`oasr_gemm.<name>` is one thing: no public name equals a submodule's, and each public op
    documents its parameters, errors and an example (what `help()` shows)."""
    import pkgutil

    from oasr_gemm._family import OPS, SUBMODULES

    modules = {m.name for m in pkgutil.iter_modules(oasr_gemm.__path__)}
    assert not set(OPS) & modules, set(OPS) & modules
    assert set(SUBMODULES) <= modules
    ops = ("gemm", "gemm_activation", "gemm_log_softmax", "bmm", "group_gemm")
    for name in (*ops, "select_default_config"):
        doc = getattr(oasr_gemm, name).__doc__ or ""
        for section in ("Parameters", "Returns", "Raises", "Examples"):
            assert f"{section}\n" in doc, f"{name}'s docstring has no {section} section"
    for name in ops:
        doc = getattr(oasr_gemm, name).__doc__
        assert 'backend="torch"' in doc and "Equivalent to" in doc, name


def test_a_call_loads_the_one_module_of_its_variant(monkeypatch):
    """Production or tuning config alike, a kernel lookup loads the module of that one variant
    (one CUTLASS unit), named after the function it exports; nothing else is built."""
    from oasr_gemm import _jit, configs, dense

    loaded = []

    class Module:
        def __getattr__(self, name):
            return name

    def config_module(config, dtype, activation="identity", with_c=False):
        loaded.append(_jit.config_module_name(config, dtype, activation, with_c))
        return Module()

    monkeypatch.setattr(_jit, "config_module", config_module)
    dense._kernel.cache_clear()
    tuning = configs.tuning_configs("9.0a")[0]
    sm80 = configs.Sm80Config(64, 64, 64, 32, 32, 4)
    try:
        assert dense._kernel(configs.DEFAULT, torch.bfloat16, "swish", True) == (
            f"gemm_swish_bf16_{configs.DEFAULT.id}_c"
        )
        assert dense._kernel(tuning, torch.float16, "identity") == f"gemm_fp16_{tuning.id}"
        assert dense._kernel(sm80, torch.float16, "relu") == f"gemm_relu_fp16_{sm80.id}"
        dense._kernel(configs.DEFAULT, torch.bfloat16, "swish", True)  # cached: no second load
    finally:
        dense._kernel.cache_clear()
    assert loaded == [
        f"oasr_gemm_swish_bf16_{configs.DEFAULT.id}_c",
        f"oasr_gemm_fp16_{tuning.id}",
        f"oasr_gemm_relu_fp16_{sm80.id}",
    ]
