"""OASR: GPU kernels for speech-recognition inference, called on PyTorch tensors.

``oasr.<op>`` re-exports the functional API of every installed family (``oasr.layer_norm`` from
oasr-norm, ``oasr.gemm`` from oasr-gemm, ...), imported on first use, so ``import oasr`` is cheap
and a family that is not installed costs nothing. ``oasr.jit`` is the JIT core (`oasr_jit`).
"""

from __future__ import annotations

import importlib

import oasr_jit as jit

__version__ = "0.1.0"

_exports: dict[str, str] | None = None  # public name -> module that defines it


def _export_table() -> dict[str, str]:
    """Which installed family exports which name; two families exporting one name is an error."""
    global _exports
    if _exports is None:
        table: dict[str, str] = {}
        owner: dict[str, str] = {}
        for family in jit.discover_families().values():
            for name in family.exports:
                if name in table and table[name] != family.module:
                    raise ImportError(
                        f"oasr.{name} is exported by two families ({owner[name]} and "
                        f"{family.name}); uninstall one of them"
                    )
                table[name], owner[name] = family.module, family.name
        _exports = table
    return _exports


def __getattr__(name: str):
    module = _export_table().get(name)
    if module is None:
        raise AttributeError(
            f"module 'oasr' has no attribute {name!r} (installed families: "
            f"{', '.join(jit.discover_families()) or 'none'}; pip install oasr-<family>)"
        )
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_export_table()})


def families() -> dict[str, jit.Family]:
    """The installed kernel families by name."""
    return jit.discover_families()
