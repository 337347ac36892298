"""CUDA modules compile for sm_90a with the real nvcc and no GPU: the core's self-test module
(every shared header), a CUTLASS include, and a CUDA error report."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from jit_helpers import requires_nvcc

from oasr_jit import JitBuildError, env, gen_jit_spec, is_complete_shared_object
from oasr_jit.selftest import gen_selftest_module

pytestmark = requires_nvcc


def cuobjdump() -> str | None:
    """cuobjdump, where the toolkit has it (the GPU machine does; the CI image does not)."""
    from oasr_jit import toolchain

    bundled = toolchain.nvcc().toolkit_root / "bin" / "cuobjdump"
    return str(bundled) if bundled.exists() else shutil.which("cuobjdump")


def cubin_archs(lib) -> str:
    return subprocess.run(
        [cuobjdump(), "--list-elf", str(lib)], capture_output=True, text=True, check=True
    ).stdout


def test_selftest_module_compiles_for_sm90a(sm90):
    spec = gen_selftest_module()
    assert spec.is_cuda
    lib = spec.build()
    assert is_complete_shared_object(lib)
    if cuobjdump() is not None:
        assert "sm_90a" in cubin_archs(lib)
    ninja = (spec.key_dir / "build.ninja").read_text()
    assert "-DOASR_TARGET_SM=90" in ninja and "-DNDEBUG" in ninja


def test_cuda_syntax_error_is_reported_first(tmp_path, sm90):
    src = tmp_path / "bad.cu"
    src.write_text("__global__ void k(float* x) {\n  x[0] = not_declared_anywhere;\n}\n")
    with pytest.raises(JitBuildError) as info:
        gen_jit_spec("cuda_bad", [src]).build()
    first = str(info.value).splitlines()[0]
    assert "not_declared_anywhere" in first and "error" in first
    assert "nvcc" in info.value.command and "bad.cu" in info.value.command
    assert "sm_90a" in str(info.value), "the hint names the architecture"


@pytest.mark.skipif(env.cutlass_info() is None, reason="CUTLASS headers not installed")
def test_cutlass_headers_are_found(tmp_path, sm90):
    src = tmp_path / "uses_cutlass.cu"
    src.write_text(
        "#include <cutlass/numeric_types.h>\n#include <cutlass/version.h>\n"
        "__global__ void k(cutlass::half_t* x) { x[0] = cutlass::half_t(CUTLASS_MAJOR); }\n"
    )
    spec = gen_jit_spec("cuda_cutlass", [src], use_cutlass=True)
    assert spec.plan().manifest["tools"]["cutlass"] == env.cutlass_info().version
    assert is_complete_shared_object(spec.build())


def test_cuda_and_host_sources_in_one_module(tmp_path, sm90):
    (tmp_path / "k.cu").write_text(
        "#include <cuda_runtime.h>\n__global__ void k(int* x) { x[0] = 1; }\n"
        "int launch_ok() { return cudaGetLastError() == cudaSuccess; }\n"
    )
    (tmp_path / "host.cc").write_text(
        "#include <cuda_runtime.h>\n#include <tvm/ffi/function.h>\nint launch_ok();\n"
        "int64_t ok() { return launch_ok(); }\nTVM_FFI_DLL_EXPORT_TYPED_FUNC(ok, ok);\n"
    )
    spec = gen_jit_spec("cuda_mixed", [tmp_path / "k.cu", tmp_path / "host.cc"])
    assert is_complete_shared_object(spec.build())
