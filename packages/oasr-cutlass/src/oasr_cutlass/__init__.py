"""CUTLASS's C++ headers for compilers: CUTLASS and CuTe (``include/``) and CUTLASS's host
utilities (``tools/util/include/``), laid out as in a CUTLASS checkout under ``source/``.

    >>> import oasr_cutlass
    >>> flags = [f"-I{d}" for d in oasr_cutlass.include_dirs()]
"""

from __future__ import annotations

from pathlib import Path

#: The CUTLASS release these headers are (also this distribution's version).
__version__ = "4.2.0"

#: The checkout-shaped root: ``include/``, ``tools/util/include/``, ``LICENSE.txt``.
SOURCE_DIR = Path(__file__).resolve().parent / "source"


def include_dirs() -> list[Path]:
    """The directories to pass as ``-I``: ``include/`` (``cutlass/``, ``cute/``), then
    ``tools/util/include/`` (``cutlass/util/``). `RuntimeError` naming the fix when the headers
    are missing."""
    dirs = [SOURCE_DIR / "include", SOURCE_DIR / "tools" / "util" / "include"]
    if not (dirs[0] / "cutlass" / "version.h").is_file():
        raise RuntimeError(
            f"oasr-cutlass at {SOURCE_DIR.parent} has no headers (no "
            "source/include/cutlass/version.h): reinstall it, `pip install --force-reinstall "
            "oasr-cutlass` (from a checkout: `pip install ./packages/oasr-cutlass`)"
        )
    return dirs
