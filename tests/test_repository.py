"""Repository conventions that code review would otherwise have to remember."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = sorted(p for p in (ROOT / "packages").iterdir() if (p / "pyproject.toml").is_file())


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
    if pkg.name != "oasr-jit":
        deps = " ".join(meta["project"].get("dependencies", []))
        assert "oasr-jit" in deps, f"{pkg.name} must depend on oasr-jit"


def test_docs_exist():
    for page in ("architecture.md", "jit.md"):
        assert (ROOT / "docs" / page).is_file()
    assert (ROOT / "third_party" / "README.md").is_file()


def _device_sources():
    for pkg in PACKAGES:
        for path in (pkg / "src").rglob("*"):
            if path.suffix in (".cu", ".cuh", ".h", ".hpp", ".inc", ".jinja"):
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
