"""The cache on disk (status, prune, clear, forget-failures) and the `oasr` command, with a fake
family registered through a real entry point."""

from __future__ import annotations

import json
import os
import textwrap
import time

import pytest
from jit_helpers import fake_nvcc, run_python

from oasr_jit import cache, gen_jit_spec
from oasr_jit.lock import BuildLock


def _built(name, tmp_path, addend) -> object:
    src = tmp_path / f"{name}_{addend}" / "m.cc"
    src.parent.mkdir(parents=True, exist_ok=True)
    src.write_text(
        f"#include <tvm/ffi/function.h>\nint64_t f(int64_t x) {{ return x + {addend}; }}\n"
        "TVM_FFI_DLL_EXPORT_TYPED_FUNC(f, f);\n"
    )
    spec = gen_jit_spec(name, [src])
    spec.build()
    return spec


def _age(spec, days: float) -> None:
    stamp = time.time() - days * 86400
    os.utime(spec.key_dir / "last_used", (stamp, stamp))


@pytest.fixture
def three_keys(tmp_path):
    """Module `m` with keys used 0, 10 and 40 days ago, and module `n` with one 40 days old."""
    fresh, ten, forty = (_built("m", tmp_path, a) for a in (1, 2, 3))
    _age(ten, 10)
    _age(forty, 40)
    other = _built("n", tmp_path, 9)
    _age(other, 40)
    return fresh, ten, forty, other


def _keys():
    return {(e.module, e.key) for e in cache.inventory()}


def test_inventory_states(three_keys, tmp_path):
    entries = cache.inventory()
    assert [e.module for e in entries] == ["m", "m", "m", "n"]
    assert entries[0].key == three_keys[0].key, "most recently used first"
    assert all(e.state == "built" and e.size_bytes > 0 for e in entries)


def test_prune_keeps_most_recent_per_module(three_keys):
    fresh, ten, forty, other = three_keys
    removed, busy = cache.prune(keep=1, dry_run=True)
    assert {e.key for e in removed} == {ten.key, forty.key} and not busy
    assert len(_keys()) == 4, "a dry run removes nothing"
    cache.prune(keep=1)
    assert _keys() == {("m", fresh.key), ("n", other.key)}


def test_prune_unused_days_and_keep_zero(three_keys):
    fresh, ten, forty, other = three_keys
    removed, _ = cache.prune(keep=1, unused_days=30)
    assert {e.key for e in removed} == {forty.key}
    removed, _ = cache.prune(keep=0, unused_days=7)
    assert {e.key for e in removed} == {ten.key, other.key}
    assert _keys() == {("m", fresh.key)}
    assert not (fresh.key_dir.parent.parent / "n").exists(), "an empty module dir goes too"


def test_prune_never_touches_a_locked_key(three_keys):
    forty = three_keys[2]
    lock = BuildLock(forty.key_dir / "m.lock", what="a build in progress", timeout_s=5)
    lock.acquire()
    try:
        removed, busy = cache.prune(keep=0)
        assert forty.key not in {e.key for e in removed}
        assert forty.key in {e.key for e in busy}
        assert forty.key_dir.exists()
        states = {e.key: e.state for e in cache.inventory()}
        assert states[forty.key] == "building"
    finally:
        lock.release()


def test_clear_and_failed_state(tmp_path):
    spec = _built("m", tmp_path, 1)
    bad = tmp_path / "bad.cc"
    bad.write_text("#error nope\n")
    from oasr_jit import JitBuildError

    with pytest.raises(JitBuildError):
        gen_jit_spec("broken", [bad]).build()
    states = {e.module: e.state for e in cache.inventory()}
    assert states == {"m": "built", "broken": "failed"}
    removed, busy = cache.clear_cache()
    assert len(removed) == 2 and not busy
    assert cache.inventory() == []
    assert not spec.lib_path.exists()


# ---------------------------------------------------------------------------------------------
# the command line, in fresh processes


def _cli(*args, env=None, check=True):
    code = f"""
        import sys
        from oasr_jit.cli import main
        rc = main({list(args)!r})
        assert "torch" not in sys.modules, "the oasr command must not import torch"
        sys.exit(rc)
    """
    return run_python(code, env=env, check=check)


@pytest.fixture
def fake_family(tmp_path):
    """A family `fake` installed through a dist-info with real entry points."""
    site = tmp_path / "site"
    dist = site / "oasr_fake-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: oasr-fake\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(
        "[oasr.families]\nfake = fake_family_reg:FAMILY\n\n"
        "[oasr.cli]\nhello = fake_family_reg:register_cli\n"
    )
    src = tmp_path / "fake_src" / "fake.cc"
    src.parent.mkdir()
    src.write_text(
        "#include <tvm/ffi/function.h>\nint64_t answer() { return 42; }\n"
        "TVM_FFI_DLL_EXPORT_TYPED_FUNC(answer, answer);\n"
    )
    (site / "fake_family_reg.py").write_text(
        textwrap.dedent(
            f"""
            import os
            from pathlib import Path
            import oasr_jit

            def production_specs(arch):
                if arch.major != 9:
                    return []
                name = "fake_" + arch.family
                specs = [oasr_jit.gen_jit_spec(m, [{str(src)!r}]) for m in (name, name + "_b")]
                if os.environ.get("FAKE_WITH_CUTLASS"):
                    specs.append(
                        oasr_jit.gen_jit_spec(name + "_cutlass", [{str(src)!r}], use_cutlass=True)
                    )
                return specs

            FAMILY = oasr_jit.Family(
                name="fake", version="0.1", module="fake_family_ops",
                include_dir=Path({str(src.parent)!r}), production_specs=production_specs,
                exports=("fake_answer",),
                supported_compute_capability=tuple(
                    int(c) for c in os.environ.get("FAKE_CCS", "").split(",") if c
                ),
            )

            def register_cli(subparsers):
                p = subparsers.add_parser("hello", help="a plugin command")
                p.set_defaults(func=lambda args: print("hello from the plugin") or 0)
            """
        )
    )
    (site / "fake_family_ops.py").write_text("def fake_answer():\n    return 42\n")
    path = os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])
    return {"PYTHONPATH": path}


def test_doctor(fake_family):
    out = _cli("doctor", env={**fake_family, "OASR_CUDA_ARCH_LIST": "9.0a"}).stdout
    for field in (
        "target arch",
        "sm_90a",
        "nvcc",
        "host compiler",
        "TVM-FFI",
        "CUTLASS",
        "JIT cache",
        "family fake",
        "OASR_CUDA_ARCH_LIST=9.0a",
    ):
        assert field in out, f"doctor output lacks {field!r}:\n{out}"


def test_list_prebuild_status(fake_family, jit_dir):
    env = {**fake_family}
    listed = _cli("jit", "list", "--arch", "9.0a", env=env).stdout
    assert "fake_sm90" in listed and "not built" in listed
    built = _cli("jit", "prebuild", "--family", "fake", "--arch", "9.0a", "--jobs", "1", env=env)
    assert "fake: 2 modules" in built.stdout
    assert built.stdout.count("built in") == 2, built.stdout  # side by side, one job between them
    # Only the fake family: real families installed beside it (oasr-norm) would be compiled too.
    again = _cli("jit", "prebuild", "--family", "fake", "--arch", "9.0a", env=env)
    assert again.stdout.count("cached") == 2
    assert "built" in _cli("jit", "list", "--family", "fake", "--arch", "9.0a", env=env).stdout
    status = json.loads(_cli("jit", "status", "--json", env=env).stdout)
    assert sorted((s["module"], s["state"]) for s in status) == [
        ("fake_sm90", "built"),
        ("fake_sm90_b", "built"),
    ]
    text = _cli("jit", "status", env=env).stdout
    assert "fake_sm90" in text and "2 built" in text


def test_prune_clear_forget_commands(tmp_path, jit_dir):
    fresh = _built("m", tmp_path, 1)
    old = _built("m", tmp_path, 2)
    _age(old, 5)
    dry = _cli("jit", "prune", "--dry-run", "--unused-days", "1").stdout
    assert f"would remove m/{old.key}" in dry and old.key_dir.exists()
    _cli("jit", "prune", "--unused-days", "1")
    assert not old.key_dir.exists() and fresh.key_dir.exists()
    failed_mod = jit_dir / "broken" / "k1"
    failed_mod.mkdir(parents=True)
    (failed_mod / "broken.so.failed").write_text("{}")
    assert "forgot 1 failed builds" in _cli("jit", "forget-failures").stdout
    assert not (failed_mod / "broken.so.failed").exists()
    assert "removed" in _cli("jit", "clear").stdout
    assert cache.inventory() == []


def test_plugin_subcommand(fake_family):
    assert "hello from the plugin" in _cli("hello", env=fake_family).stdout


@pytest.mark.parametrize(
    "args",
    [
        ["jit", "prune", "--keep", "-1"],
        ["jit", "nope"],
        ["frobnicate"],
        ["jit", "prebuild", "--arch", "banana"],
        ["jit", "prebuild", "--family", "missing"],
        ["jit", "prune", "--unused-days", "soon"],
    ],
)
def test_bad_arguments_exit_nonzero_with_one_line(args, fake_family):
    proc = _cli(*args, env=fake_family, check=False)
    assert proc.returncode != 0
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "error" in lines[0], proc.stderr


def test_every_command_has_help():
    for args in (
        ["--help"],
        ["doctor", "--help"],
        ["jit", "--help"],
        *[
            ["jit", c, "--help"]
            for c in ("list", "status", "prebuild", "prune", "clear", "forget-failures")
        ],
    ):
        proc = _cli(*args, check=False)
        assert proc.returncode == 0 and "usage:" in proc.stdout, args


def test_import_does_not_import_torch_or_tvm_ffi():
    proc = run_python(
        "import sys, oasr_jit; print('torch' in sys.modules, 'tvm_ffi' in sys.modules)"
    )
    assert proc.stdout.strip() == "False False"


def test_console_script_is_installed():
    from importlib.metadata import entry_points

    scripts = {ep.name: ep.value for ep in entry_points(group="console_scripts")}
    assert scripts.get("oasr") == "oasr_jit.cli:main"


# ---------------------------------------------------------------------------------------------
# prebuild: requirements and architectures refused up front, subsets, progress


def _one_error_line(proc) -> str:
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    return lines[0]


@pytest.fixture
def nvcc_of_three_arches(tmp_path):
    """OASR_NVCC: an nvcc that builds sm_75, sm_80 and sm_90 (and compiles nothing)."""
    return {"OASR_NVCC": str(fake_nvcc(tmp_path / "toolkit"))}


def test_prebuild_refuses_an_arch_the_toolkit_cannot_build(fake_family, nvcc_of_three_arches):
    env = {**fake_family, **nvcc_of_three_arches}
    for command in ("prebuild", "list"):
        proc = _cli("jit", command, "--family", "fake", "--arch", "7.7", env=env, check=False)
        assert proc.returncode == 2, proc.stderr
        line = _one_error_line(proc)
        assert "cannot build for sm_77" in line and "7.5, 8.0, 9.0a" in line, line
    assert cache.inventory() == [], "nothing may be compiled or keyed"


def test_prebuild_says_why_a_family_builds_nothing(fake_family, nvcc_of_three_arches):
    env = {**fake_family, **nvcc_of_three_arches}
    proc = _cli("jit", "prebuild", "--family", "fake", "--arch", "8.0", env=env, check=False)
    assert proc.returncode == 2
    assert "fake: no production modules for sm_80 (serves sm_90a)" in proc.stdout, proc.stdout
    assert "nothing to build for sm_80" in _one_error_line(proc)
    listed = _cli("jit", "list", "--family", "fake", "--arch", "8.0", env=env).stdout
    assert "no production modules for sm_80 (serves sm_90a)" in listed


def test_family_declared_compute_capabilities(tmp_path):
    from oasr_jit import Family, UnsupportedArchitectureError, parse_arch

    declared = Family("x", "0", "oasr_x", tmp_path, supported_compute_capability=(80, 90))
    assert declared.supports(parse_arch("9.0a")) and declared.supports(parse_arch("9.0"))
    assert declared.supports(parse_arch("8.0")) and not declared.supports(parse_arch("8.6"))
    assert declared.unsupported_reason(parse_arch("8.0")) is None
    with pytest.raises(
        UnsupportedArchitectureError, match=r"does not serve sm_120 .* sm_80, sm_90"
    ):
        declared.require_arch(parse_arch("12.0a"))
    assert Family("y", "0", "y", tmp_path).supports(parse_arch("8.6"))  # declares none: any


def test_prebuild_refuses_an_arch_the_family_does_not_declare(fake_family, nvcc_of_three_arches):
    env = {**fake_family, **nvcc_of_three_arches, "FAKE_CCS": "90"}
    proc = _cli("jit", "prebuild", "--family", "fake", "--arch", "8.0", env=env, check=False)
    assert proc.returncode == 2, proc.stderr
    line = _one_error_line(proc)
    assert "the fake family (fake_family_ops 0.1) does not serve sm_80" in line, line
    assert "it serves sm_90" in line and "OASR_CUDA_ARCH_LIST" in line, line
    listed = _cli("jit", "list", "--family", "fake", "--arch", "8.0", env=env).stdout
    assert "does not serve sm_80 (serves sm_90a)" in listed, listed
    assert cache.inventory() == [], "nothing may be compiled or keyed"


def test_the_first_build_refuses_an_arch_the_family_does_not_declare(monkeypatch, tmp_path):
    """The runtime path: a module of a family (by its name, oasr_<family>_...) planned for an
    architecture the family does not declare raises before anything compiles."""
    from oasr_jit import Family, UnsupportedArchitectureError, arch, families, gen_jit_spec

    fam = Family("zz", "0", "oasr_zz", tmp_path, supported_compute_capability=(90,))
    monkeypatch.setattr(families, "discover_families", lambda: {"zz": fam})
    src = tmp_path / "k.cu"
    src.write_text("__global__ void k() {}\n")
    arch._reset_for_tests()
    monkeypatch.setenv("OASR_CUDA_ARCH_LIST", "8.6")
    try:
        with pytest.raises(UnsupportedArchitectureError, match="zz family .* sm_86.* sm_90"):
            gen_jit_spec("oasr_zz_rows", [src]).build()
        assert families.family_of_module("oasr_zzz") is None  # a prefix, not the family
        assert families.family_of_module("oasr_zz") is fam
    finally:
        arch._reset_for_tests()


def test_prebuild_checks_requirements_before_compiling(fake_family, tmp_path, counting_cxx):
    empty = tmp_path / "no-cutlass"
    empty.mkdir()
    env = {**fake_family, "FAKE_WITH_CUTLASS": "1", "OASR_CUTLASS_DIR": str(empty)}
    proc = _cli("jit", "prebuild", "--family", "fake", "--arch", "9.0a", env=env, check=False)
    assert proc.returncode == 1
    line = _one_error_line(proc)
    assert "1 of 3 selected modules need CUTLASS headers" in line, line
    assert "OASR_CUTLASS_DIR" in line and "nothing was compiled" in line, line
    assert counting_cxx.compiles == 0, "no module may compile before every requirement is met"
    assert cache.inventory() == []

    listed = _cli("jit", "list", "--family", "fake", "--arch", "9.0a", env=env)
    out = listed.stdout
    assert "fake_sm90_cutlass" in out and "no key: needs CUTLASS headers" in out, out
    assert "fake_sm90_b" in out and "not built" in out, "what can be listed is listed"
    assert "missing: 1 of 3 selected modules need CUTLASS headers" in out


def test_check_requirements_names_nvcc_for_cuda_specs(tmp_path, monkeypatch, sm90):
    from oasr_jit.core import check_requirements

    cu = tmp_path / "k.cu"
    cu.write_text("__global__ void k() {}\n")
    cc = tmp_path / "h.cc"
    cc.write_text("int h() { return 1; }\n")
    monkeypatch.setenv("OASR_NVCC", str(tmp_path / "no-such-nvcc"))
    specs = [gen_jit_spec("cuda_mod", [cu]), gen_jit_spec("host_mod", [cc])]
    missing = check_requirements(specs)
    assert [(m.what, m.modules) for m in missing] == [("nvcc", ("cuda_mod",))]
    assert "OASR_NVCC" in missing[0].problem


def test_prebuild_module_and_filter(fake_family, jit_dir):
    env = {**fake_family}
    one = _cli(
        "jit", "prebuild", "--family", "fake", "--arch", "9.0a", "--module", "fake_sm90_b", env=env
    )
    assert "fake: 1 of 2 modules for sm_90a" in one.stdout, one.stdout
    assert [(e.module, e.state) for e in cache.inventory()] == [("fake_sm90_b", "built")]

    unknown = _cli(
        "jit", "prebuild", "--arch", "9.0a", "--module", "fake_sm9", env=env, check=False
    )
    assert unknown.returncode == 2
    line = _one_error_line(unknown)
    assert "--module fake_sm9" in line and "close: fake_sm90" in line, line

    picked = _cli("jit", "list", "--family", "fake", "--arch", "9.0a", "--filter", "_B", env=env)
    assert "fake_sm90_b" in picked.stdout and "fake_sm90 " not in picked.stdout, picked.stdout
    nothing = _cli("jit", "prebuild", "--arch", "9.0a", "--filter", "zzz", env=env, check=False)
    assert nothing.returncode == 2 and "--filter zzz" in _one_error_line(nothing)


def test_prebuild_progress_names_module_and_what_is_left(fake_family, counting_cxx):
    counting_cxx.slow_down(4.0)  # past the 3 s after which a build reports progress
    proc = _cli(
        "jit",
        "prebuild",
        "--family",
        "fake",
        "--arch",
        "9.0a",
        "--jobs",
        "1",
        "--module",
        "fake_sm90",
        env=fake_family,
    )
    assert "oasr-jit: building fake_sm90 (0/1 modules done, 0/2 units, " in proc.stderr, proc.stderr
    assert "oasr-jit: built fake_sm90 in" in proc.stderr


# ---------------------------------------------------------------------------------------------
# oasr doctor and torch


def _doctor(prelude: str, env=None):
    code = f"""
        import sys
        {prelude}
        from oasr_jit.cli import main
        sys.exit(main(["doctor"]))
    """
    return run_python(code, env=env, check=False)


def test_doctor_without_torch_says_how_to_install_it():
    proc = _doctor("sys.modules['torch'] = None  # what `import torch` finds without torch")
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode == 1, "a missing torch is a problem: every op needs it"
    row = next(line for line in proc.stdout.splitlines() if line.strip().startswith("torch"))
    assert "NOT INSTALLED" in row and "pip install torch" in row, row


def test_doctor_names_a_cpu_build_of_torch(tmp_path):
    fake = tmp_path / "fake_torch" / "torch"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('the doctor must not import torch')\n")
    (fake / "version.py").write_text(
        "from typing import Optional\n__version__ = '9.9.0+cpu'\ncuda: Optional[str] = None\n"
    )
    path = os.pathsep.join([str(fake.parent), os.environ.get("PYTHONPATH", "")])
    proc = _doctor("", env={"PYTHONPATH": path})
    row = next(line for line in proc.stdout.splitlines() if line.strip().startswith("torch"))
    assert "9.9.0+cpu" in row and "CPU-only build" in row, row


@pytest.mark.parametrize(
    "driver, torch_cuda, verdict, problem",
    [
        ("13.0", "12.8", "matches the driver", 0),
        ("12.4", "12.8", "minor version compatibility", 0),
        ("12.4", "13.0", "MISMATCH", 1),
    ],
)
def test_doctor_compares_torch_cuda_with_the_driver(
    monkeypatch, tmp_path, driver, torch_cuda, verdict, problem
):
    from oasr_jit import cli, env
    from oasr_jit.arch import DriverInfo

    info = env.TorchInfo(version=f"2.9.0+cu{torch_cuda}", cuda=torch_cuda, hip=None, root=tmp_path)
    monkeypatch.setattr(env, "torch_info", lambda: info)
    row, is_problem = cli._torch_row(DriverInfo(version=driver, gpus=()))
    assert verdict in row and is_problem == problem, row
    assert f"CUDA {torch_cuda}" in row and driver in row


def test_status_and_prebuild_name_a_resumed_build(fake_family, jit_dir):
    args = ("jit", "prebuild", "--arch", "9.0a", "--module", "fake_sm90_b")
    _cli(*args, env=fake_family)
    (entry,) = cache.inventory()
    (entry.path / "fake_sm90_b.so").unlink()  # the link of an interrupted build never happened
    status = _cli("jit", "status", env=fake_family).stdout
    assert "incomplete" in status and "1 objects kept: the next build resumes" in status, status
    again = _cli(*args, env=fake_family).stdout
    assert "(resumed: kept 1 of 1 objects)" in again, again
