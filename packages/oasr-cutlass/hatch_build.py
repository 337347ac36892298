"""Puts CUTLASS's headers into the package, taken from the ``nvidia-cutlass`` wheel that
``[build-system] requires`` pins (its ``cutlass_library/source/`` tree, a CUTLASS checkout's
layout). A wheel build includes them from there; an editable install copies them into
``src/oasr_cutlass/source/`` (git-ignored), where the package finds them."""

from __future__ import annotations

import re
import shutil
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

#: What the package carries, relative to a CUTLASS checkout (and to ``oasr_cutlass/source/``).
TREES = ("include", "tools/util/include")


def _nvidia_cutlass(expected_version: str) -> tuple[Path, Path]:
    """The installed nvidia-cutlass wheel's checkout-shaped root and its license file."""
    try:
        dist = distribution("nvidia-cutlass")
    except PackageNotFoundError:
        raise RuntimeError(
            "building oasr-cutlass needs the nvidia-cutlass wheel (its [build-system] requires): "
            "let pip build it in isolation, or `pip install --no-deps nvidia-cutlass` first"
        ) from None
    root = Path(dist.locate_file("cutlass_library/source"))
    version_h = (root / "include" / "cutlass" / "version.h").read_text()
    found = ".".join(
        re.search(rf"#define\s+CUTLASS_{field}\s+(\d+)", version_h).group(1)
        for field in ("MAJOR", "MINOR", "PATCH")
    )
    if found != expected_version:
        raise RuntimeError(
            f"nvidia-cutlass {dist.version} holds CUTLASS {found}, but oasr-cutlass is "
            f"{expected_version}: install the nvidia-cutlass that pyproject.toml's "
            "[build-system] requires names"
        )
    licenses = [f for f in dist.files or () if f.name.upper().startswith("LICENSE")]
    if not licenses:
        raise RuntimeError(f"nvidia-cutlass {dist.version} ships no license file")
    return root, Path(dist.locate_file(licenses[0]))


class CustomBuildHook(BuildHookInterface):
    def initialize(self, version: str, build_data: dict) -> None:
        source, license_file = _nvidia_cutlass(self.metadata.version)
        if license_file.read_text() != (Path(self.root) / "LICENSE-CUTLASS.txt").read_text():
            raise RuntimeError(
                f"CUTLASS's license changed: copy {license_file} to LICENSE-CUTLASS.txt"
            )
        if version == "editable":
            target = Path(self.root) / "src" / "oasr_cutlass" / "source"
            shutil.rmtree(target, ignore_errors=True)
            for tree in TREES:
                shutil.copytree(source / tree, target / tree)
            shutil.copyfile(license_file, target / "LICENSE.txt")
            return
        for tree in TREES:
            build_data["force_include"][str(source / tree)] = f"oasr_cutlass/source/{tree}"
        build_data["force_include"][str(license_file)] = "oasr_cutlass/source/LICENSE.txt"
