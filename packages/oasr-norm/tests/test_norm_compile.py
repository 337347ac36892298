"""Compile-only smoke of every norm-family module for sm_90a with the real nvcc (no GPU needed):
what CI can prove about the device code."""

from __future__ import annotations

import shutil

import pytest

from oasr_jit import is_complete_shared_object, parse_arch

pytestmark = pytest.mark.skipif(
    shutil.which("nvcc") is None and not __import__("os").environ.get("CUDA_HOME"),
    reason="needs nvcc",
)


@pytest.fixture
def hopper(monkeypatch):
    from oasr_jit import arch

    arch._reset_for_tests()
    monkeypatch.setenv("OASR_CUDA_ARCH_LIST", "9.0a")
    yield parse_arch("9.0a")
    arch._reset_for_tests()


def test_every_production_module_compiles_for_sm90a(hopper):
    from oasr_jit import discover_families
    from oasr_norm import _jit

    specs = discover_families()["norm"].production_specs(hopper)
    rows = {_jit.row_norm_name(*variant) for variant in _jit.row_norm_variants()}
    assert (
        len(rows) == 27 and "oasr_norm_layer_fp16" in rows and "oasr_norm_add_rms_act_bf16" in rows
    )
    assert {s.name for s in specs} == {
        *rows,
        "oasr_norm_channels",
        "oasr_norm_activation",
        "oasr_norm_softmax",
        *(_jit.masked_softmax_name(dtype) for dtype in _jit.DTYPES),
    }
    for spec in specs:
        assert spec.is_cuda
        assert "-gencode=arch=compute_90a,code=sm_90a" in spec.plan().manifest["ninja"]
        assert is_complete_shared_object(spec.build()), spec.name
