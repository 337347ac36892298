"""Cache-key invariants: what must share a key, and every change that must make a new one."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from jit_helpers import CountingCompiler, requires_nvcc

from oasr_jit import arch, env, gen_jinja_jit_spec, gen_jit_spec


@pytest.fixture
def tree(tmp_path):
    """A module with a source and an include dir holding a nested header."""
    root = tmp_path / "checkout_a"
    (root / "include" / "oasr" / "demo").mkdir(parents=True)
    (root / "include" / "oasr" / "demo" / "consts.h").write_text("#define ADDEND 3\n")
    (root / "csrc").mkdir()
    (root / "csrc" / "mod.cc").write_text(
        '#include "oasr/demo/consts.h"\n#include <tvm/ffi/function.h>\n'
        "int64_t f(int64_t x) { return x + ADDEND; }\nTVM_FFI_DLL_EXPORT_TYPED_FUNC(f, f);\n"
    )
    return root


def spec_of(root: Path, **kw):
    return gen_jit_spec(
        "keyed", [root / "csrc" / "mod.cc"], extra_include_dirs=[root / "include"], **kw
    )


def test_same_sources_at_two_paths_share_a_key(tree, tmp_path):
    other = tmp_path / "elsewhere" / "checkout_b"
    shutil.copytree(tree, other)
    a, b = spec_of(tree), spec_of(other)
    assert a.key == b.key
    assert str(tree) not in a.plan().manifest["ninja"]
    # ... and the library built from one is the other's cache hit.
    assert a.build_and_load().f(1) == 4
    assert b.is_built


def test_key_is_stable_and_deterministic(tree):
    assert spec_of(tree).key == spec_of(tree).key


def test_source_content_changes_key(tree):
    before = spec_of(tree).key
    src = tree / "csrc" / "mod.cc"
    src.write_text(src.read_text() + "// a comment is a change\n")
    assert spec_of(tree).key != before


@pytest.mark.parametrize("change", ["edit", "add", "rename", "nested_dir"])
def test_header_changes_key(tree, change):
    before = spec_of(tree).key
    header = tree / "include" / "oasr" / "demo" / "consts.h"
    if change == "edit":
        header.write_text("#define ADDEND 4\n")
    elif change == "add":
        (header.parent / "unused.cuh").write_text("// new\n")
    elif change == "rename":
        header.rename(header.parent / "consts2.h")
    else:
        (tree / "include" / "oasr" / "extra").mkdir()
        (tree / "include" / "oasr" / "extra" / "x.inc").write_text("// new\n")
    assert spec_of(tree).key != before


def test_header_beside_a_static_source_changes_key(tree):
    before = spec_of(tree).key
    (tree / "csrc" / "launcher.h").write_text("// quoted includes find me here\n")
    assert spec_of(tree).key != before


def test_non_header_files_do_not_change_key(tree):
    before = spec_of(tree).key
    (tree / "include" / "README.md").write_text("docs")
    (tree / "include" / "gen.py").write_text("print(1)")
    assert spec_of(tree).key == before


@pytest.mark.parametrize(
    "kw",
    [
        {"extra_cflags": ["-DX=1"]},
        {"extra_ldflags": ["-Wl,-O1"]},
        {"extra_cflags": ["-O3"]},
    ],
)
def test_flags_change_key(tree, kw):
    assert spec_of(tree, **kw).key != spec_of(tree).key


@pytest.mark.parametrize("var", ["OASR_EXTRA_CFLAGS", "OASR_EXTRA_LDFLAGS"])
def test_env_flags_change_key(tree, monkeypatch, var):
    before = spec_of(tree).key
    monkeypatch.setenv(var, "-DFROM_ENV=1")
    assert spec_of(tree).key != before


def test_host_compiler_path_and_version_change_key(tree, tmp_path, monkeypatch):
    before = spec_of(tree).key
    real = shutil.which("c++")
    (tmp_path / "w1").mkdir()
    wrapper = CountingCompiler(tmp_path / "w1", real)
    monkeypatch.setenv("CXX", str(wrapper.path))
    via_wrapper = spec_of(tree).key
    assert via_wrapper != before, "CXX's path is part of the key"
    # Same path, new version text (an upgraded compiler): a new key, asked of the new binary.
    (tmp_path / "w2").mkdir()
    upgraded = CountingCompiler(tmp_path / "w2", real, version_suffix="patched build 2")
    shutil.copy(upgraded.path, wrapper.path)
    from oasr_jit import toolchain

    toolchain.tool_version.cache_clear()  # a new process would ask again
    assert spec_of(tree).key != via_wrapper


def test_tvm_ffi_version_changes_key(tree, monkeypatch):
    before = spec_of(tree).key
    real = env.tvm_ffi_info()
    monkeypatch.setattr(env, "tvm_ffi_info", lambda: real._replace(version="99.0"))
    assert spec_of(tree).key != before


def test_tvm_ffi_location_does_not_change_key(tree, monkeypatch, tmp_path):
    before = spec_of(tree).key
    real = env.tvm_ffi_info()
    moved = tmp_path / "venv2" / "tvm_ffi"
    shutil.copytree(real.root / "include", moved / "include")
    monkeypatch.setattr(env, "tvm_ffi_info", lambda: real._replace(root=moved))
    assert spec_of(tree).key == before


def _fake_cutlass(root: Path, minor: int) -> Path:
    (root / "include" / "cutlass").mkdir(parents=True)
    (root / "include" / "cutlass" / "version.h").write_text(
        f"#define CUTLASS_MAJOR 4\n#define CUTLASS_MINOR {minor}\n#define CUTLASS_PATCH 0\n"
    )
    return root


def test_cutlass_version_stamp_changes_key(tree, tmp_path, monkeypatch):
    monkeypatch.setenv("OASR_CUTLASS_DIR", str(_fake_cutlass(tmp_path / "c42", 2)))
    first = spec_of(tree, use_cutlass=True)
    assert first.plan().manifest["tools"]["cutlass"] == "4.2.0"
    monkeypatch.setenv("OASR_CUTLASS_DIR", str(_fake_cutlass(tmp_path / "c43", 3)))
    assert spec_of(tree, use_cutlass=True).key != first.key
    # A checkout of the same version elsewhere shares the key.
    monkeypatch.setenv("OASR_CUTLASS_DIR", str(_fake_cutlass(tmp_path / "other" / "c42", 2)))
    assert spec_of(tree, use_cutlass=True).key == first.key
    # A module that does not use CUTLASS does not depend on it.
    assert "cutlass" not in spec_of(tree).plan().manifest["tools"]


def test_bad_cutlass_dir_is_refused(tree, tmp_path, monkeypatch):
    monkeypatch.setenv("OASR_CUTLASS_DIR", str(tmp_path))
    with pytest.raises(RuntimeError, match="not a CUTLASS checkout"):
        spec_of(tree, use_cutlass=True).plan()


def test_rendered_source_keyed_by_text(tmp_path):
    template = tmp_path / "t.cc.jinja"
    template.write_text("int v() { return {{ value }}; }\n")
    a = gen_jinja_jit_spec("rendered", [("t.cc", template, {"value": 1})])
    b = gen_jinja_jit_spec("rendered", [("t.cc", template, {"value": 2})])
    c = gen_jinja_jit_spec("rendered", [("t.cc", template, {"value": 1})])
    assert a.key != b.key and a.key == c.key


def test_name_is_part_of_key(host_source):
    assert gen_jit_spec("one", [host_source]).key != gen_jit_spec("two", [host_source]).key


@requires_nvcc
class TestCudaKey:
    @pytest.fixture
    def cuda_src(self, tmp_path):
        src = tmp_path / "k.cu"
        src.write_text("__global__ void k(float* x) { x[0] = 1.0f; }\n")
        return src

    def test_arch_changes_key_and_device_does_not(self, cuda_src, monkeypatch):
        monkeypatch.setenv("OASR_CUDA_ARCH_LIST", "9.0a")
        arch._reset_for_tests()
        hopper = gen_jit_spec("cuda_k", [cuda_src])
        ninja = hopper.plan().manifest["ninja"]
        assert "-gencode=arch=compute_90a,code=sm_90a" in ninja
        assert "-DNDEBUG" in ninja
        monkeypatch.setenv("OASR_CUDA_ARCH_LIST", "8.0")
        arch._reset_for_tests()
        ampere = gen_jit_spec("cuda_k", [cuda_src])
        assert "-gencode=arch=compute_80,code=sm_80" in ampere.plan().manifest["ninja"]
        assert ampere.key != hopper.key

    def test_cuda_flags_and_nvcc_identity_change_key(self, cuda_src, sm90, monkeypatch, tmp_path):
        base = gen_jit_spec("cuda_k", [cuda_src]).key
        assert gen_jit_spec("cuda_k", [cuda_src], extra_cuda_cflags=["-lineinfo"]).key != base
        monkeypatch.setenv("OASR_EXTRA_CUDAFLAGS", "-DX=2")
        assert gen_jit_spec("cuda_k", [cuda_src]).key != base
        monkeypatch.delenv("OASR_EXTRA_CUDAFLAGS")
        # Another nvcc (here: a wrapper that reports a different version) is another key.
        from oasr_jit import toolchain

        real = toolchain.nvcc()
        fake = tmp_path / "bin" / "nvcc"
        fake.parent.mkdir()
        fake.write_text(
            f'#!/bin/sh\nif [ "$1" = "--version" ]; then {real.path} --version; '
            f'echo "rebuilt"; exit 0; fi\nexec {real.path} "$@"\n'
        )
        fake.chmod(0o755)
        monkeypatch.setenv("OASR_NVCC", str(fake))
        other = gen_jit_spec("cuda_k", [cuda_src])
        assert other.plan().nvcc.path == str(fake)
        assert other.key != base
