"""Compile-only check of the decoder's CUDA units (top-k, the GPU CTC decoders) for every
architecture the family serves besides sm_90a, each unit compiled into an object holding the
architectures' cubins (nvcc, no GPU, no link). ctc_cuda.cu sizes its shared memory from
OASR_TARGET_SM, so it compiles once per architecture."""

from __future__ import annotations

import os
import shutil
from concurrent.futures import ThreadPoolExecutor

import pytest

from oasr_decoder import _family, _jit
from oasr_jit import parse_arch
from oasr_jit.testing import compile_units_for_arches

pytestmark = pytest.mark.skipif(
    shutil.which("nvcc") is None and not os.environ.get("CUDA_HOME"), reason="needs nvcc"
)

#: every served architecture but sm_90 (the family's modules build for it in its other tests)
ARCHES = [
    parse_arch(f"{cc // 10}.{cc % 10}") for cc in _family.SUPPORTED_COMPUTE_CAPABILITY if cc != 90
]


@pytest.fixture
def plan_arch(monkeypatch, tmp_path):
    from oasr_jit import arch

    arch._reset_for_tests()
    monkeypatch.setenv("OASR_CUDA_ARCH_LIST", "8.0")
    monkeypatch.setenv("OASR_JIT_DIR", str(tmp_path / "jit"))
    yield
    arch._reset_for_tests()


def test_the_cuda_units_compile_for_every_other_architecture(plan_arch, tmp_path):
    assert [a.sm for a in ARCHES] == ["sm_80", "sm_86", "sm_89", "sm_100a", "sm_120a"]
    specs = [_jit.gen_topk_module(), _jit.gen_ctc_cuda_module()]
    with ThreadPoolExecutor(len(specs)) as pool:  # nvcc runs side by side, MAX_JOBS at a time
        topk, ctc = pool.map(
            lambda s: compile_units_for_arches(s, ARCHES, tmp_path / s.name), specs
        )
    assert sorted(topk) == ["topk.cu"] and sorted(ctc) == ["ctc_cuda.cu"]
