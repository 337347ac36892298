"""Compile-only smoke: one variant of the sm90 template builds for sm_90a with nvcc (no GPU).
About a minute on a 2-core machine."""

from __future__ import annotations

import os
import shutil

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
    spec = _jit.gen_gemm_module("oasr_gemm_smoke", [configs.DEFAULT], ("fp16",))
    assert "-gencode=arch=compute_90a,code=sm_90a" in spec.plan().manifest["ninja"]
    assert is_complete_shared_object(spec.build())
