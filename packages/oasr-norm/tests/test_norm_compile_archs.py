"""Compile-only check for every architecture the family serves besides sm_90a (which
test_norm_compile.py builds and links): one variant of the row-norm template (layer norm in
fp32, without the fused activation, the cheapest) and of the masked-softmax template (fp32), the
channel norms and the activations, each unit compiled once into an object holding sm_80, sm_86,
sm_89, sm_100a and sm_120a cubins (nvcc, no GPU, no link). softmax.cu is left to the sm_90a
build: its kernels, oasr/common/softmax.cuh, are compiled for these architectures by the GEMM
family's row pass (test_gemm_compile_archs.py)."""

from __future__ import annotations

import os
import shutil
from concurrent.futures import ThreadPoolExecutor

import pytest

from oasr_jit import parse_arch
from oasr_jit.testing import compile_units_for_arches
from oasr_norm import _family, _jit

pytestmark = pytest.mark.skipif(
    shutil.which("nvcc") is None and not os.environ.get("CUDA_HOME"), reason="needs nvcc"
)

#: every served architecture but sm_90 (test_norm_compile.py)
ARCHES = [
    parse_arch(f"{cc // 10}.{cc % 10}") for cc in _family.SUPPORTED_COMPUTE_CAPABILITY if cc != 90
]


@pytest.fixture
def plan_arch(monkeypatch, tmp_path):
    """The specs are planned for sm_80 (their flags); the units compile for all of ARCHES."""
    from oasr_jit import arch

    arch._reset_for_tests()
    monkeypatch.setenv("OASR_CUDA_ARCH_LIST", "8.0")
    monkeypatch.setenv("OASR_JIT_DIR", str(tmp_path / "jit"))
    yield
    arch._reset_for_tests()


def test_one_variant_per_template_compiles_for_every_other_architecture(plan_arch, tmp_path):
    assert [a.sm for a in ARCHES] == ["sm_80", "sm_86", "sm_89", "sm_100a", "sm_120a"]
    chosen = [
        (_jit.gen_row_norm_module("layer", "fp32"), ["oasr_norm_layer_fp32.cu"]),
        (_jit.gen_channel_norm_module(), ["channel_norm.cu"]),
        (_jit.gen_activation_module(), ["activation.cu"]),
        (_jit.gen_masked_softmax_module("fp32"), ["oasr_norm_masked_softmax_fp32.cu"]),
    ]

    def compile_one(item):
        spec, units = item
        return compile_units_for_arches(spec, ARCHES, tmp_path / spec.name, units)

    with ThreadPoolExecutor(len(chosen)) as pool:  # nvcc runs side by side, MAX_JOBS at a time
        done = [unit for found in pool.map(compile_one, chosen) for unit in found]
    assert sorted(done) == [
        "activation.cu",
        "channel_norm.cu",
        "oasr_norm_layer_fp32.cu",
        "oasr_norm_masked_softmax_fp32.cu",
    ]
