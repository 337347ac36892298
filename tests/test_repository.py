"""Repository conventions that code review would otherwise have to remember."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = sorted(p for p in (ROOT / "packages").iterdir() if (p / "pyproject.toml").is_file())
#: CUTLASS's headers, not a family: no oasr-jit dependency, and its source/ (an editable
#: install's git-ignored copy of CUTLASS) is not OASR's code
CUTLASS_PACKAGE = ROOT / "packages" / "oasr-cutlass"
CUTLASS_COPY = CUTLASS_PACKAGE / "src" / "oasr_cutlass" / "source"


def test_ci_runs_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text()
    command = next(line for line in ci.splitlines() if "nox" in line and not line.startswith("#"))
    readme = (ROOT / "README.md").read_text()
    assert command.strip() in readme, f"README must show CI's command: {command.strip()}"
    assert "nox -s demo" in readme


@pytest.mark.parametrize("pkg", PACKAGES, ids=lambda p: p.name)
def test_each_package_is_a_distribution(pkg):
    meta = tomllib.loads((pkg / "pyproject.toml").read_text())
    assert meta["build-system"]["build-backend"] == "hatchling.build"
    assert meta["project"]["name"] == pkg.name
    assert re.fullmatch(r"\d+\.\d+\.\d+", meta["project"]["version"])
    for doc in ("README.md", "CHANGELOG.md"):
        assert (pkg / doc).is_file() and (pkg / doc).read_text().strip(), f"{pkg.name}/{doc}"
    assert meta["project"]["version"] in (pkg / "CHANGELOG.md").read_text()
    if pkg.name not in ("oasr-jit", CUTLASS_PACKAGE.name):
        deps = " ".join(meta["project"].get("dependencies", []))
        assert "oasr-jit" in deps, f"{pkg.name} must depend on oasr-jit"


def test_bench_extras_declare_the_peers_their_benches_import():
    """`oasr bench decoder --filter cpu` times pyctcdecode (numpy for its input): the decoder's
    `bench` extra installs them, and its doc says so."""
    meta = tomllib.loads((ROOT / "packages" / "oasr-decoder" / "pyproject.toml").read_text())
    bench = meta["project"]["optional-dependencies"]["bench"]
    names = {re.split(r"[<>=\[ ]", req, maxsplit=1)[0] for req in bench}
    assert {"numpy", "pyctcdecode"} <= names, bench
    assert "oasr-decoder[bench]" in (ROOT / "docs" / "decoder.md").read_text()


def test_docs_exist():
    for page in ("architecture.md", "jit.md"):
        assert (ROOT / "docs" / page).is_file()
    assert (ROOT / "third_party" / "README.md").is_file()


def _device_sources():
    for pkg in PACKAGES:
        for path in (pkg / "src").rglob("*"):
            if path.suffix in (".cu", ".cuh", ".h", ".hpp", ".inc", ".jinja"):
                if not path.is_relative_to(CUTLASS_COPY):
                    yield path


def test_no_assert_in_device_code():
    offenders = [
        str(p.relative_to(ROOT))
        for p in _device_sources()
        if re.search(r"(?<![_\w])assert\s*\(", p.read_text())
    ]
    assert not offenders, f"use static_assert / can_implement, not assert(): {offenders}"


def test_every_launcher_opens_a_device_scope():
    """Issue: multi-GPU. A launcher must launch on its tensors' device with that device's stream;
    `oasr::DeviceScope` is the one helper that does both."""
    missing = []
    for pkg in PACKAGES:
        for path in (pkg / "src").rglob("csrc/*.cu"):
            text = path.read_text()
            if path.name.endswith("_jit_binding.cu") or "<<<" not in text:
                continue
            if "DeviceScope" not in text:
                missing.append(str(path.relative_to(ROOT)))
    assert not missing, f"launchers without oasr::DeviceScope: {missing}"


def test_no_null_stream_launches():
    offenders = []
    for path in _device_sources():
        for match in re.finditer(r"<<<([^>]*)>>>", path.read_text()):
            args = [a.strip() for a in match.group(1).split(",")]
            if len(args) < 4 or args[3] in ("0", "nullptr", "NULL"):
                offenders.append(f"{path.relative_to(ROOT)}: <<<{match.group(1)}>>>")
    assert not offenders, f"launch on the caller's stream (DeviceScope::stream()): {offenders}"


def test_graph_captures_name_their_stream():
    """torch.cuda.graph without ``stream=`` captures on a stream torch made once, on the device
    current at the first capture: a later capture for another device records an empty graph
    (found on two H200s). Every capture in the repository names a stream of its device."""
    offenders = []
    for path in ROOT.rglob("*.py"):
        if any(part.startswith(".") for part in path.relative_to(ROOT).parts):
            continue
        for line_no, line in enumerate(path.read_text().splitlines(), 1):
            if "torch.cuda.graph(" in line and "stream=" not in line:
                offenders.append(f"{path.relative_to(ROOT)}:{line_no}")
    assert not offenders, f"torch.cuda.graph(...) without stream=: {offenders}"


def test_test_files_have_unique_names_and_never_import_conftest():
    """Every package's tests run in one pytest process (prepend import mode): two test files (or
    helper modules) with one basename collide, and `from conftest import` gets whichever
    package's conftest loaded first. Name test files test_<family>_*.py and put helpers in a
    uniquely named module."""
    seen: dict[str, Path] = {}
    for path in sorted(ROOT.glob("packages/*/tests/**/*.py")) + sorted(ROOT.glob("tests/*.py")):
        if path.name in ("conftest.py", "__init__.py"):
            continue
        assert path.name not in seen, f"{path} and {seen[path.name]} share a module name"
        seen[path.name] = path
        text = path.read_text()
        assert not re.search(r"^\s*from conftest import", text, re.M), f"{path} imports conftest"


# ---------------------------------------------------------------------------------------------
# one family layout


def _families() -> dict[str, Path]:
    """Family name -> its package directory (the ``oasr.families`` entry point it declares)."""
    out = {}
    for pkg in PACKAGES:
        meta = tomllib.loads((pkg / "pyproject.toml").read_text())
        for name in meta["project"].get("entry-points", {}).get("oasr.families", {}):
            out[name] = pkg
    return out


FAMILIES = _families()


def _src(family: str) -> Path:
    return FAMILIES[family] / "src" / f"oasr_{family}"


@pytest.mark.parametrize("family", FAMILIES)
def test_every_family_has_the_same_skeleton(family):
    src = _src(family)
    for name in ("__init__.py", "_family.py", "_jit.py", "_checks.py", "twins.py", "bench.py"):
        assert (src / name).is_file(), f"oasr_{family}/{name} is missing"
    assert (src / "include" / "oasr" / family).is_dir(), f"device code in include/oasr/{family}/"
    init = (src / "__init__.py").read_text()
    assert "lazy_package(__name__, OPS, SUBMODULES)" in init, (
        f"oasr_{family}/__init__.py must read its public names from _family.OPS"
    )
    assert "exports=tuple(OPS)" in (src / "_family.py").read_text()


@pytest.mark.parametrize("family", FAMILIES)
def test_device_code_lives_under_include_and_exports_in_binding_files(family):
    src = _src(family)
    misplaced, exports = [], []
    for path in src.rglob("*"):
        if path.suffix not in (".cu", ".cuh", ".h", ".cc", ".jinja"):
            continue
        rel = path.relative_to(src)
        text = path.read_text()
        in_include = rel.parts[:3] == ("include", "oasr", family)
        if not in_include and (path.suffix == ".cuh" or "__global__" in text):
            misplaced.append(str(rel))
        if "TVM_FFI_DLL_EXPORT_TYPED_FUNC" in text and "_jit_binding." not in path.name:
            exports.append(str(rel))
    assert not misplaced, f"device code outside include/oasr/{family}/: {misplaced}"
    assert not exports, f"TVM-FFI exports outside csrc/*_jit_binding.* files: {exports}"


@pytest.mark.parametrize("family", FAMILIES)
def test_module_names_carry_the_family_and_no_op_hides_a_submodule(family):
    import importlib

    import oasr_jit

    registered = oasr_jit.discover_families()[family]
    specs = registered.production_specs(oasr_jit.parse_arch("9.0a"))
    bad = [s.name for s in specs if not s.name.startswith(f"oasr_{family}_")]
    assert not bad, f"module names must start with oasr_{family}_: {bad}"
    fam = importlib.import_module(f"oasr_{family}._family")
    submodules = {p.stem for p in _src(family).glob("*.py")}
    clash = sorted(set(fam.OPS) & submodules)
    assert not clash, f"public names that are also submodules of oasr_{family}: {clash}"
    assert set(registered.exports) == set(fam.OPS)


# ---------------------------------------------------------------------------------------------
# the tree speaks of the product

_PRODUCT_DIRS = ("docs", "packages", "examples")
_TEXT_SUFFIXES = {".md", ".py", ".cu", ".cuh", ".h", ".cc", ".jinja", ".toml", ".json", ".txt"}


def _product_files():
    for top in _PRODUCT_DIRS:
        for path in (ROOT / top).rglob("*"):
            parts = path.relative_to(ROOT).parts
            if path.is_relative_to(CUTLASS_COPY) or not path.is_file():
                continue
            if not any(p.startswith(".") or p == "__pycache__" for p in parts):
                yield path
    yield ROOT / "README.md"


def test_no_development_history_in_the_product():
    """Docs, code and data describe the library as it is; history is `git log`."""
    # "sNN" as a run number (h200_norm_s21.json, "(s30)"); s80 / s90 are architecture tags (the
    # sm80 lane's config names, "s80_t64x64x64_w32x32_s4")
    pattern = re.compile(r"session [0-9]|(\b|_)s(?!80\b|90\b)[0-9]{2}[a-z]?\b", re.I)
    offenders = []
    for path in _product_files():
        if path.suffix not in _TEXT_SUFFIXES:
            continue
        for line_no, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if pattern.search(line):
                offenders.append(f"{path.relative_to(ROOT)}:{line_no}: {line.strip()[:80]}")
    assert not offenders, "development history in the product:\n" + "\n".join(offenders[:20])


def test_no_patch_files_and_nothing_cites_files_outside_the_repository():
    files = [p for p in ROOT.rglob("*") if ".git" not in p.parts and p.is_file()]
    patches = [str(p.relative_to(ROOT)) for p in files if p.suffix in (".patch", ".diff")]
    assert not patches, f"rejected changes belong in a doc's Tried-and-rejected table: {patches}"
    cites = []
    for path in _product_files():
        if path.suffix in _TEXT_SUFFIXES and re.search(
            r"shared/design|\.\./shared|BENCHMARKS\.md", path.read_text(errors="replace")
        ):
            cites.append(str(path.relative_to(ROOT)))
    assert not cites, f"cite docs/benchmarks.md, not a file outside the repository: {cites}"


def test_published_measurements_are_what_the_docs_show():
    """docs/perf/<gpu>.md and each family doc's measured table are generated from the JSON
    files in docs/perf (`oasr bench <family> --publish docs/perf`): a hand edit fails here."""
    from oasr_jit import bench

    perf = ROOT / "docs" / "perf"
    texts = bench.render_perf_docs(perf, write=False)
    assert texts, "no published measurements under docs/perf"
    stale = [str(p.relative_to(ROOT)) for p, text in texts.items() if p.read_text() != text]
    assert not stale, f"regenerate with `oasr bench <family> --publish docs/perf`: {stale}"
    published = {p.stem for p in perf.glob("*.json")}
    extra = {p.name for p in perf.iterdir() if p.suffix in (".json", ".png")} - {
        f"{stem}{suffix}" for stem in published for suffix in (".json", ".png")
    }
    assert not extra, f"files under docs/perf that no published JSON explains: {extra}"


# ---------------------------------------------------------------------------------------------
# benchmarks/ holds only scripts that run against HEAD


def _benchmark_files(suffix: str) -> list[Path]:
    return sorted(ROOT.glob(f"packages/*/benchmarks/**/*{suffix}"))


@pytest.mark.parametrize("path", _benchmark_files(".py"), ids=lambda p: p.name)
def test_benchmark_scripts_import_against_head(path):
    """Importing runs nothing (work sits under ``if __name__ == "__main__"``) but resolves every
    import, so a script that names a function HEAD no longer has fails here."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"_bench_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert "__main__" in path.read_text(), f"{path.name}: put the run under __main__"


@pytest.mark.parametrize("path", _benchmark_files(".cu"), ids=lambda p: p.name)
def test_benchmark_probes_compile_against_head(path, tmp_path):
    import subprocess

    from oasr_jit import toolchain

    nvcc = toolchain.nvcc().path
    includes = [f"-I{p}" for p in ROOT.glob("packages/*/src/*/include")]
    cmd = [nvcc, "-std=c++17", "-gencode=arch=compute_90a,code=sm_90a", *includes]
    subprocess.run([*cmd, "-c", str(path), "-o", str(tmp_path / "probe.o")], check=True)


# ---------------------------------------------------------------------------------------------
# the CUTLASS release: one in oasr-cutlass, which oasr-gemm pins


def test_the_cutlass_release_agrees_everywhere():
    """oasr-cutlass's version is the CUTLASS release: its __version__, the nvidia-cutlass wheel
    its build copies from, and oasr-gemm's pin all name it (hatch_build.py checks the headers)."""
    meta = tomllib.loads((CUTLASS_PACKAGE / "pyproject.toml").read_text())
    version = meta["project"]["version"]
    assert meta["project"]["dependencies"] == [], "oasr-cutlass is headers only"
    assert f"nvidia-cutlass=={version}.0" in meta["build-system"]["requires"]
    init = (CUTLASS_PACKAGE / "src" / "oasr_cutlass" / "__init__.py").read_text()
    assert f'__version__ = "{version}"' in init
    gemm = tomllib.loads((ROOT / "packages" / "oasr-gemm" / "pyproject.toml").read_text())
    assert f"oasr-cutlass=={version}" in gemm["project"]["dependencies"]
    assert "oasr.families" not in meta["project"].get("entry-points", {}), "not a family"
