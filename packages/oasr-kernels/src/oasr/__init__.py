"""OASR: GPU kernels for speech-recognition inference, called on PyTorch tensors.

``oasr.<op>`` is the functional API of every installed family (``oasr.layer_norm`` from
oasr-norm, ``oasr.gemm`` from oasr-gemm, ...), imported on first use: ``import oasr`` is cheap and
a family that is not installed costs nothing. ``oasr.families()`` lists the installed families,
``oasr.jit`` is the JIT core (`oasr_jit`). ``help(oasr)`` lists the installed families' ops.
"""

import importlib as _importlib
import sys as _sys
import types as _types

import oasr_jit as jit

__version__ = "0.1.0"

_exports = None  # public name -> module that defines it, read once from the installed families


def _export_table() -> dict:
    """Which installed family exports which name; two families exporting one name is an error."""
    global _exports
    if _exports is None:
        table, owner = {}, {}
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


def families() -> dict:
    """The installed kernel families by name (``{"norm": Family(...), ...}``)."""
    return jit.discover_families()


def _families_doc() -> str:
    found = families()
    if not found:
        return "\nInstalled families: none (pip install oasr-<family>, or oasr-kernels for all).\n"
    lines = ["", "Installed families and their ops:", ""]
    for family in found.values():
        lines.append(f"    {family.name} ({family.module} {family.version}):")
        names = ", ".join(family.exports)
        while names:
            cut = names.rfind(", ", 0, 84) if len(names) > 84 else len(names)
            lines.append(f"        {names[:cut]}")
            names = names[cut + 2 :]
    return "\n".join(lines) + "\n"


_BASE_DOC = __doc__
_PUBLIC = ("families", "jit", "__version__")


class _OasrModule(_types.ModuleType):
    """The package's module type: its docstring names what is installed (computed when asked)."""

    @property
    def __doc__(self):  # the module docstring, with the installed families
        return _BASE_DOC + _families_doc()


def __getattr__(name: str):
    if name == "__all__":
        return sorted({*_PUBLIC, *_export_table()})
    module = _export_table().get(name)
    if module is None:
        raise AttributeError(
            f"module 'oasr' has no attribute {name!r} (installed families: "
            f"{', '.join(families()) or 'none'}; pip install oasr-<family>)"
        )
    value = getattr(_importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip __getattr__
    return value


def __dir__() -> list:
    return sorted({*_PUBLIC, *_export_table()})


_sys.modules[__name__].__class__ = _OasrModule
