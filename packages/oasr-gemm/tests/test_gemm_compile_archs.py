"""Compile-only check for every architecture the family serves besides sm_90a (which
test_gemm_compile.py builds and links): one variant of each template the sm80 lane's
architectures build (the sm80 GEMM, bmm's general lane, group_gemm, the log-softmax row pass),
each unit compiled once into an object holding sm_80, sm_86, sm_89, sm_100a and sm_120a cubins
(nvcc, no GPU, no link). The sm90-only templates (TMA + wgmma, bmm's tuned lane, the fused
heads) are not built for these architectures (`configs.lanes`)."""

from __future__ import annotations

import os
import shutil
from concurrent.futures import ThreadPoolExecutor

import pytest

from oasr_gemm import _family, _jit, configs
from oasr_jit import parse_arch
from oasr_jit.testing import compile_units_for_arches

pytestmark = pytest.mark.skipif(
    shutil.which("nvcc") is None and not os.environ.get("CUDA_HOME"), reason="needs nvcc"
)

#: every served architecture but sm_90 (test_gemm_compile.py)
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


def test_the_served_architectures_are_the_ones_compiled():
    assert [a.sm for a in ARCHES] == ["sm_80", "sm_86", "sm_89", "sm_100a", "sm_120a"]
    assert all(configs.lanes(a) == (configs.SM80_LANE,) for a in ARCHES)


def test_one_variant_per_template_compiles_for_every_other_architecture(plan_arch, tmp_path):
    default = configs.SM80_DEFAULT  # what an untuned call runs on these architectures
    specs = [
        _jit.gen_gemm_module("oasr_gemm_arch_smoke", [default], ("fp16",), "swish"),
        _jit.gen_bmm_module("oasr_gemm_bmm_arch_smoke", ("bf16",), ("b_col",), tuned=()),
        _jit.gen_group_module("oasr_gemm_group_arch_smoke", ("fp16",)),
        _jit.gen_log_softmax_module(),
    ]
    with ThreadPoolExecutor(len(specs)) as pool:  # nvcc runs side by side, MAX_JOBS at a time
        done = pool.map(lambda s: compile_units_for_arches(s, ARCHES, tmp_path / s.name), specs)
        units = {unit: seconds for found in done for unit, seconds in found.items()}
    assert sorted(units) == sorted(
        [
            f"gemm_swish_fp16_{default.id}.cu",
            "bmm_bf16_b_col.cu",
            "group_gemm_fp16.cu",
            "log_softmax_rows.cu",
        ]
    )
