"""Compile-only smoke for sm_90a with nvcc (no GPU): one config of the sm90 template with the
plain, the exact-GELU (adding a matrix C) and the Swish epilogue (about a minute each, side by
side on a 2-core machine; the plain module also links an sm80 unit: lanes may share a module),
the sm80 lane's four ways of splitting K (about 30 s for the four units), one unit of bmm's
CUTLASS 2.x general lane (its 13 alignment pairs, the small-K and small-N kernels, about 35 s)
with one unit of its sm90 tuned lane, one of group_gemm (about 15 s), gemm_log_softmax's row
pass (the shared softmax kernels, about 30 s) and its two fused heads (one module: the
one-kernel and the cluster head, about 15 s)."""

from __future__ import annotations

import os
import shutil
from concurrent.futures import ThreadPoolExecutor

import pytest

from oasr_gemm import _jit, configs
from oasr_jit import is_complete_shared_object, parse_arch

pytestmark = pytest.mark.skipif(
    shutil.which("nvcc") is None and not os.environ.get("CUDA_HOME"), reason="needs nvcc"
)


@pytest.fixture
def hopper(monkeypatch, tmp_path):
    from oasr_jit import arch

    arch._reset_for_tests()
    monkeypatch.setenv("OASR_CUDA_ARCH_LIST", "9.0a")
    monkeypatch.setenv("OASR_JIT_DIR", str(tmp_path / "jit"))
    yield parse_arch("9.0a")
    arch._reset_for_tests()


def test_the_default_config_compiles_for_sm90a(hopper):
    """The plain epilogue, the heaviest activation's (exact GELU, in the kernel that adds a
    matrix C) and Swish's (column pairs), built side by side; the plain module also holds an sm80
    config (the binding exports both lanes' signatures)."""
    sm80 = configs.Sm80Config(64, 64, 64, 32, 32, 4)
    chosen = [("identity", [configs.DEFAULT, sm80], False), ("gelu", [configs.DEFAULT], True)]
    chosen.append(("swish", [configs.DEFAULT], False))
    specs = [
        _jit.gen_gemm_module(f"oasr_gemm_smoke_{act}", units, ("fp16",), act, with_c)
        for act, units, with_c in chosen
    ]
    assert "-gencode=arch=compute_90a,code=sm_90a" in specs[0].plan().manifest["ninja"]
    with ThreadPoolExecutor(len(specs)) as pool:
        for built in pool.map(lambda spec: spec.build(), specs):
            assert is_complete_shared_object(built)


def test_each_sm80_split_compiles_for_sm90a(hopper):
    """No split, serial and parallel split-K, Stream-K: one unit each, Swish in the epilogue
    (the serial split must skip it on all but the last slice)."""
    splits = [("none", 1), ("serial", 2), ("parallel", 4), ("streamk", 1)]
    chosen = [configs.Sm80Config(64, 128, 64, 32, 64, 4, s, n) for s, n in splits]
    spec = _jit.gen_gemm_module("oasr_gemm_sm80_smoke", chosen, ("fp16",), "swish")
    assert is_complete_shared_object(spec.build())


def test_a_bmm_unit_compiles_for_sm90a(hopper):
    """The launcher unit (the general lane) with one tuned-lane unit (the sm90 template)."""
    tuned = configs.BMM_TUNED[-1]
    spec = _jit.gen_bmm_module("oasr_gemm_bmm_smoke", ("bf16",), ("b_col",), (tuned,))
    assert [s.name for s in spec.sources] == [
        f"bmm_bf16_b_col_{tuned.id}.cu",
        "bmm_bf16_b_col.cu",
        "oasr_gemm_bmm_smoke_jit_binding.cc",
    ]
    assert is_complete_shared_object(spec.build())


def test_a_group_gemm_unit_compiles_for_sm90a(hopper):
    spec = _jit.gen_group_module("oasr_gemm_group_smoke", ("fp16",))
    assert is_complete_shared_object(spec.build())


def test_the_log_softmax_row_pass_compiles_for_sm90a(hopper):
    assert is_complete_shared_object(_jit.gen_log_softmax_module().build())


def test_the_fused_heads_compile_for_sm90a(hopper):
    """TMA + wgmma in inline PTX, both dtypes (about 15 s)."""
    assert is_complete_shared_object(_jit.gen_head_module().build())
