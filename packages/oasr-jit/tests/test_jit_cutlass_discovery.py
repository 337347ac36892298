"""Where CUTLASS's headers come from: ``OASR_CUTLASS_DIR``, else the ``oasr-cutlass`` package,
else the ``nvidia-cutlass`` wheel; the same release gives the same key from either package."""

from __future__ import annotations

import sys
import textwrap

import pytest
from jit_helpers import requires_nvcc

from oasr_jit import env, gen_jit_spec


def _checkout(root, version="4.2.0"):
    """A CUTLASS-checkout-shaped tree: include/cutlass/version.h and tools/util/include/."""
    major, minor, patch = version.split(".")
    (root / "include" / "cutlass").mkdir(parents=True)
    (root / "include" / "cutlass" / "version.h").write_text(
        f"#define CUTLASS_MAJOR {major}\n#define CUTLASS_MINOR {minor}\n"
        f"#define CUTLASS_PATCH {patch}\n"
    )
    (root / "tools" / "util" / "include").mkdir(parents=True)
    return root


@pytest.fixture
def packages(tmp_path, monkeypatch):
    """Fake `oasr_cutlass` and `cutlass_library` packages first on sys.path; returns a function
    that hides one of them (as if it were not installed)."""
    site = tmp_path / "site"
    _checkout(site / "cutlass_library" / "source", "4.2.0")
    (site / "cutlass_library" / "__init__.py").write_text("")
    fake = site / "oasr_cutlass"
    _checkout(fake / "source", "4.2.0")
    (fake / "__init__.py").write_text(
        textwrap.dedent(
            """
            from pathlib import Path
            SOURCE_DIR = Path(__file__).parent / "source"
            def include_dirs():
                if not (SOURCE_DIR / "include").is_dir():
                    raise RuntimeError("oasr-cutlass has no headers: reinstall it")
                return [SOURCE_DIR / "include", SOURCE_DIR / "tools" / "util" / "include"]
            """
        )
    )
    monkeypatch.syspath_prepend(str(site))
    for name in ("oasr_cutlass", "cutlass_library"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    monkeypatch.delenv("OASR_CUTLASS_DIR", raising=False)

    def hide(name):
        monkeypatch.setitem(sys.modules, name, None)  # find_spec answers None

    hide.site = site
    return hide


def test_oasr_cutlass_comes_before_the_nvidia_cutlass_wheel(packages):
    info = env.cutlass_info()
    assert info.source == "oasr-cutlass"
    assert info.version == "4.2.0"
    assert info.include_dirs == (
        (packages.site / "oasr_cutlass" / "source" / "include").resolve(),
        (packages.site / "oasr_cutlass" / "source" / "tools" / "util" / "include").resolve(),
    )
    packages("oasr_cutlass")
    info = env.cutlass_info()
    assert info.source == "nvidia-cutlass wheel", "the nvidia-cutlass wheel is still accepted"
    assert info.include_dirs[0] == (packages.site / "cutlass_library/source/include").resolve()


def test_oasr_cutlass_dir_comes_first(packages, tmp_path, monkeypatch):
    checkout = _checkout(tmp_path / "cutlass", "4.3.1")
    monkeypatch.setenv("OASR_CUTLASS_DIR", str(checkout))
    info = env.cutlass_info()
    assert (info.source, info.version) == ("OASR_CUTLASS_DIR", "4.3.1")


def test_a_broken_oasr_cutlass_is_an_error_not_a_fallback(packages):
    import shutil

    shutil.rmtree(packages.site / "oasr_cutlass" / "source")
    with pytest.raises(RuntimeError, match="reinstall"):
        env.cutlass_info()


def test_no_headers_names_oasr_cutlass(packages):
    packages("oasr_cutlass")
    packages("cutlass_library")
    assert env.cutlass_info() is None
    with pytest.raises(RuntimeError, match="CUTLASS headers not found") as info:
        env.require_cutlass()
    assert "pip install oasr-cutlass" in str(info.value)
    assert "./packages/oasr-cutlass" in str(info.value)


@requires_nvcc
def test_the_same_release_keys_the_same_from_either_package(tmp_path, sm90, monkeypatch):
    """The key carries CUTLASS's version and its include dirs as placeholders, not their
    location: oasr-cutlass and the nvidia-cutlass wheel holding one release share keys."""
    import importlib.util

    if importlib.util.find_spec("oasr_cutlass") is None:
        pytest.skip("oasr-cutlass is not installed")
    if importlib.util.find_spec("cutlass_library") is None:
        pytest.skip("the nvidia-cutlass wheel is not installed")
    monkeypatch.delenv("OASR_CUTLASS_DIR", raising=False)
    src = tmp_path / "k.cu"
    src.write_text("#include <cutlass/version.h>\n__global__ void k(int* x) { x[0] = 1; }\n")
    first = env.cutlass_info()
    key = gen_jit_spec("cutlass_key", [src], use_cutlass=True).key
    monkeypatch.setitem(sys.modules, "oasr_cutlass", None)
    second = env.cutlass_info()
    assert (first.source, second.source) == ("oasr-cutlass", "nvidia-cutlass wheel")
    if first.version != second.version:
        pytest.skip(f"different releases installed: {first.version}, {second.version}")
    assert gen_jit_spec("cutlass_key", [src], use_cutlass=True).key == key
