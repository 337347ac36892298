"""The installed oasr-cutlass carries CUTLASS's headers, its license, and says its release."""

from __future__ import annotations

import re
from importlib.metadata import version

import oasr_cutlass


def test_include_dirs_hold_cutlass_cute_and_the_utilities():
    include, util = oasr_cutlass.include_dirs()
    assert (include / "cutlass" / "gemm" / "collective" / "collective_builder.hpp").is_file()
    assert (include / "cute" / "tensor.hpp").is_file()
    assert (util / "cutlass" / "util" / "packed_stride.hpp").is_file()
    assert len(list(include.rglob("*.h*"))) > 500, "the whole include/ tree"


def test_the_version_is_the_headers_release():
    text = (oasr_cutlass.include_dirs()[0] / "cutlass" / "version.h").read_text()
    release = ".".join(
        re.search(rf"#define\s+CUTLASS_{f}\s+(\d+)", text).group(1)
        for f in ("MAJOR", "MINOR", "PATCH")
    )
    assert oasr_cutlass.__version__ == release == version("oasr-cutlass")


def test_cutlass_license_ships_with_the_headers():
    license_text = (oasr_cutlass.SOURCE_DIR / "LICENSE.txt").read_text()
    assert "NVIDIA CORPORATION" in license_text and "Redistribution" in license_text
