"""Host-only C++ modules: built with the real host compiler, loaded, called; the cache layout;
spec validation."""

from __future__ import annotations

import json
import textwrap

import pytest

import oasr_jit
from oasr_jit import JitBuildError, gen_jinja_jit_spec, gen_jit_spec


def test_build_load_and_call(host_source, jit_dir):
    spec = gen_jit_spec("host_add", [host_source])
    module = spec.build_and_load()
    assert module.add_one(41) == 42
    assert spec.lib_path == jit_dir / "host_add" / spec.key / "host_add.so"
    assert oasr_jit.is_complete_shared_object(spec.lib_path)
    assert (spec.key_dir / "last_used").exists()
    assert not spec.is_cuda
    # The module object is shared per key in a process.
    assert gen_jit_spec("host_add", [host_source]).build_and_load() is module


def test_build_without_load_then_cached(host_source, counting_cxx):
    spec = gen_jit_spec("host_add", [host_source])
    lib = spec.build()
    assert lib.is_file() and counting_cxx.compiles == 1
    assert gen_jit_spec("host_add", [host_source]).build() == lib
    assert counting_cxx.compiles == 1, "a cached key must not compile again"
    assert spec.build_and_load().add_one(1) == 2
    assert counting_cxx.compiles == 1


def test_mixed_host_sources_and_flags(tmp_path):
    (tmp_path / "lib.cpp").write_text(
        "#include <cstdint>\nint64_t scale(int64_t x) { return x * FACTOR; }\n"
    )
    (tmp_path / "main.cc").write_text(
        textwrap.dedent(
            """
            #include <tvm/ffi/function.h>
            int64_t scale(int64_t x);
            int64_t twice_scaled(int64_t x) { return 2 * scale(x); }
            TVM_FFI_DLL_EXPORT_TYPED_FUNC(twice_scaled, twice_scaled);
            """
        )
    )
    spec = gen_jit_spec(
        "host_mixed", [tmp_path / "main.cc", tmp_path / "lib.cpp"], extra_cflags=["-DFACTOR=5"]
    )
    assert spec.build_and_load().twice_scaled(3) == 30


def test_rendered_sources_live_in_memory_until_built(tmp_path):
    template = tmp_path / "op.cc.jinja"
    template.write_text(
        textwrap.dedent(
            """
            #include <tvm/ffi/function.h>
            int64_t {{ name }}(int64_t x) { return x * {{ factor }}; }
            TVM_FFI_DLL_EXPORT_TYPED_FUNC({{ name }}, {{ name }});
            """
        )
    )
    spec = gen_jinja_jit_spec(
        "host_rendered", [("times7.cc", template, {"name": "times7", "factor": 7})]
    )
    assert not spec.key_dir.exists(), "rendering must not write anything before the build"
    assert spec.build_and_load().times7(6) == 42
    written = spec.key_dir / "gen" / "times7.cc"
    assert "x * 7" in written.read_text()
    info = json.loads((spec.key_dir / "spec.json").read_text())
    assert info["key"] == spec.key and info["name"] == "host_rendered"


def test_undefined_template_variable_is_an_error(tmp_path):
    import jinja2

    template = tmp_path / "t.cc.jinja"
    template.write_text("int x = {{ missing }};\n")
    with pytest.raises(jinja2.UndefinedError):
        gen_jinja_jit_spec("host_bad_template", [("t.cc", template, {})])


@pytest.mark.parametrize(
    "name, sources, error",
    [
        ("bad-name", None, "identifier"),
        ("1abc", None, "identifier"),
        ("empty", [], "no sources"),
    ],
)
def test_spec_validation(host_source, name, sources, error):
    with pytest.raises(ValueError, match=error):
        gen_jit_spec(name, [host_source] if sources is None else sources)


def test_source_suffix_and_duplicates(tmp_path, host_source):
    other = tmp_path / "notes.txt"
    other.write_text("x")
    with pytest.raises(ValueError, match="CUDA"):
        gen_jit_spec("host_txt", [other])
    twin = tmp_path / "twin" / "add.cc"
    twin.parent.mkdir()
    twin.write_text(host_source.read_text())
    with pytest.raises(ValueError, match="two sources named add.cc"):
        gen_jit_spec("host_dup", [host_source, twin])
    with pytest.raises(FileNotFoundError):
        gen_jit_spec("host_missing", [tmp_path / "nope.cc"])
    with pytest.raises(TypeError, match="list of flags"):
        gen_jit_spec("host_flags", [host_source], extra_cflags="-O3")
    with pytest.raises(FileNotFoundError, match="include dir"):
        gen_jit_spec("host_inc", [host_source], extra_include_dirs=[tmp_path / "nope"])


def test_compile_error_names_first_error_and_command(tmp_path):
    src = tmp_path / "broken.cc"
    src.write_text("int main() {\n  return undefined_symbol_xyz;\n}\n")
    spec = gen_jit_spec("host_broken", [src])
    with pytest.raises(JitBuildError) as info:
        spec.build()
    err = info.value
    assert isinstance(err, RuntimeError)
    first_line = str(err).splitlines()[0]
    assert "host_broken" in first_line and "undefined_symbol_xyz" in first_line
    assert "error" in first_line
    assert "broken.cc" in err.command and " -c " in err.command
    assert "undefined_symbol_xyz" in err.output
    assert not spec.lib_path.exists()
    assert (spec.key_dir / "host_broken.so.failed").exists()


def test_link_error_is_a_build_error(tmp_path):
    src = tmp_path / "unresolved.cc"
    src.write_text(
        textwrap.dedent(
            """
            #include <tvm/ffi/function.h>
            int64_t missing_impl(int64_t);
            int64_t f(int64_t x) { return missing_impl(x); }
            TVM_FFI_DLL_EXPORT_TYPED_FUNC(f, f);
            """
        )
    )
    # the default link flags refuse it (it would load, then end the process at the first call)
    spec = gen_jit_spec("host_unresolved", [src])
    with pytest.raises(JitBuildError, match="missing_impl"):
        spec.build()


def test_first_call_build_names_the_op(host_source, counting_cxx, capfd):
    counting_cxx.slow_down(3.5)  # past the 3 s after which a build reports progress
    spec = gen_jit_spec("first_call", [host_source])

    @oasr_jit.oasr_api
    def add_one(x):
        return spec.build_and_load().add_one(x)

    assert add_one(1) == 2
    err = capfd.readouterr().err
    assert "oasr-jit: building first_call (first call of oasr.add_one, 0/2 units, " in err, err
