"""The sm80 lane (CUTLASS 2.x mma.sync: no split, serial / parallel split-K, Stream-K) on the GPU:
against an fp32 reference on odd M, K shorter than the split's slices, N at the alignment edge;
bias, matrix C and activations through each split; the workspace contract; selection from a
tuning entry; CUDA-graph capture (the workspace comes from the graph's pool)."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

import oasr_gemm
from oasr_gemm import _jit, selection
from oasr_gemm.configs import LANE, Sm80Config
from oasr_gemm.dense import VariantUnsupportedError, _run
from oasr_jit import tuning
from oasr_jit.testing import skip_unless_gpu

pytestmark = skip_unless_gpu()

SPLITS = {
    "none": Sm80Config(64, 128, 64, 32, 64, 4),
    "serial": Sm80Config(64, 128, 64, 32, 64, 4, "serial", 4),
    "parallel": Sm80Config(64, 128, 64, 32, 64, 4, "parallel", 4),
    "streamk": Sm80Config(64, 128, 64, 32, 64, 4, "streamk"),
    "serial_wide": Sm80Config(128, 128, 64, 64, 64, 3, "serial", 2),
}
DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}
# (M, N, K): one row, odd M, K below one 64-wide slice per split, ASR decode sizes
SHAPES = [(1, 8, 8), (7, 24, 72), (33, 136, 200), (64, 2048, 512), (250, 512, 1024)]
ACTS = {
    "swish": torch.nn.functional.silu,
    "gelu": torch.nn.functional.gelu,
}


@pytest.fixture(scope="module", autouse=True)
def built():
    """Every module these tests use, built side by side (one unit each)."""
    specs = [_jit.gen_config_module(c, dt) for c in SPLITS.values() for dt in DTYPES]
    specs += [
        _jit.gen_config_module(SPLITS[s], "fp16", act)
        for s in ("serial", "parallel", "streamk")
        for act in ACTS
    ]
    with ThreadPoolExecutor(len(specs)) as pool:
        list(pool.map(lambda spec: spec.build(), specs))


def _inputs(M, N, K, dtype, seed=0):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    A = torch.randn(M, K, device="cuda", generator=gen).to(dtype)
    B = (torch.randn(N, K, device="cuda", generator=gen) / K**0.5).to(dtype)
    bias = torch.randn(N, device="cuda", generator=gen).to(dtype)
    return A, B, bias


def _ref(A, B, C=None, act=None):
    y = A.float() @ B.float().T
    if C is not None:
        y = y + C.float()
    return ACTS[act](y) if act else y


def _assert_close(got, want, dtype):
    # the serial split rounds its partial sums to the output dtype between slices
    tol = 1e-2 if dtype == torch.float16 else 4e-2
    torch.testing.assert_close(got.float(), want, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", DTYPES.values(), ids=DTYPES)
@pytest.mark.parametrize("split", SPLITS)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_each_split_with_a_bias(shape, split, dtype):
    M, N, K = shape
    A, B, bias = _inputs(M, N, K, dtype)
    out = torch.full((M, N), float("nan"), device="cuda", dtype=dtype)
    _run(SPLITS[split], dtype, out, A, B, bias, None, "identity")
    _assert_close(out, _ref(A, B, bias), dtype)


@pytest.mark.parametrize("split", SPLITS)
def test_matrix_c_and_no_c(split):
    dtype = torch.float16
    M, N, K = 100, 264, 392
    A, B, _ = _inputs(M, N, K, dtype, seed=1)
    C = torch.randn(M, N, device="cuda").to(dtype)
    for source in (C, None):
        out = torch.full((M, N), float("nan"), device="cuda", dtype=dtype)
        _run(SPLITS[split], dtype, out, A, B, None, source, "identity")
        _assert_close(out, _ref(A, B, source), dtype)


@pytest.mark.parametrize("act", ACTS)
@pytest.mark.parametrize("split", ["serial", "parallel", "streamk"])
def test_the_activation_is_applied_once_after_the_sum(split, act):
    """A serial split applies it on the last slice only; parallel and Stream-K after the sum."""
    dtype = torch.float16
    M, N, K = 48, 256, 1000
    A, B, bias = _inputs(M, N, K, dtype, seed=2)
    out = torch.full((M, N), float("nan"), device="cuda", dtype=dtype)
    _run(SPLITS[split], dtype, out, A, B, bias, None, act)
    _assert_close(out, _ref(A, B, bias, act), dtype)


def test_the_workspace_contract():
    dtype = torch.float16
    A, B, bias = _inputs(64, 512, 512, dtype, seed=3)
    out = torch.empty(64, 512, device="cuda", dtype=dtype)
    config = SPLITS["parallel"]
    fn = getattr(_jit.config_module(config, "fp16"), _jit.function_name(config, "fp16"))
    size = getattr(
        _jit.config_module(config, "fp16"), _jit.function_name(config, "fp16") + "_workspace"
    )
    need = size(64, 512, 512, A.device.index)
    assert need == 4 * 64 * 512 * 4  # fp32 partials of four slices
    assert size(64, 512, 0, A.device.index) == 0
    with pytest.raises(ValueError, match=f"needs a workspace of {need} bytes"):
        fn(out, A, B, bias, None, torch.empty(need - 16, dtype=torch.uint8, device="cuda"))
    with pytest.raises(ValueError, match=f"needs a workspace of {need} bytes"):
        fn(out, A, B, bias, None, None)
    # one source at a time: the Python API never passes both; the variant refuses before launch
    with pytest.raises(VariantUnsupportedError):
        fn(
            out,
            A,
            B,
            bias,
            torch.zeros_like(out),
            torch.empty(need, dtype=torch.uint8, device="cuda"),
        )
    torch.cuda.synchronize()


def test_selected_from_a_tuning_entry_and_captured(tmp_path, monkeypatch):
    """A user-tier entry naming sm80 configs sends the API there (below GEMM_MIN_ROWS too), and
    a CUDA graph of it replays the same answer."""
    key_plain = tuning.signature("gemm", "gemm", "half", N=512, K=512)
    key_act = tuning.signature("gemm", "gemm_activation", "half", N=512, K=512)
    chosen = {"gemm": SPLITS["parallel"], "gemm_activation": SPLITS["streamk"]}
    data = {
        "schema": tuning.SCHEMA,
        "family": "gemm",
        "arch": "sm90",
        "lane": LANE,
        "validators": {},
        "configs": {c.id: c.to_params() for c in chosen.values()},
        "entries": {
            key_plain: {"regions": [[256, chosen["gemm"].id]]},
            key_act: {"regions": [[256, chosen["gemm_activation"].id]]},
        },
    }
    (tmp_path / "sm90").mkdir()
    (tmp_path / "sm90" / "gemm.json").write_text(json.dumps(data))
    monkeypatch.setenv("OASR_TUNE_USER_DB", str(tmp_path))
    tuning.reload()
    try:
        dtype = torch.float16
        A, B, bias = _inputs(64, 512, 512, dtype, seed=4)
        pick = selection.select_default_config("gemm", 64, 512, 512, dtype)
        assert pick == selection.Selection(chosen["gemm"], "user")
        _assert_close(oasr_gemm.gemm(A, B, bias), _ref(A, B, bias), dtype)
        out = torch.empty(64, 512, device="cuda", dtype=dtype)
        oasr_gemm.gemm_activation(A, B, bias, activation="swish", out=out)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=side):
            plain = oasr_gemm.gemm(A, B, bias)
            oasr_gemm.gemm_activation(A, B, bias, activation="swish", out=out)
        plain.fill_(float("nan"))
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        _assert_close(plain, _ref(A, B, bias), dtype)
        _assert_close(out, _ref(A, B, bias, "swish"), dtype)
    finally:
        monkeypatch.delenv("OASR_TUNE_USER_DB")
        tuning.reload()
