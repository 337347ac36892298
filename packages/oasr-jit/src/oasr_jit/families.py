"""Kernel families register with the core through the entry-point group ``oasr.families``.

A family's ``pyproject.toml`` declares::

    [project.entry-points."oasr.families"]
    norm = "oasr_norm._family:FAMILY"

where ``FAMILY`` is a `Family`. The registration module must be cheap to import (no torch, no
build): ``oasr jit list|status|prebuild`` and the ``oasr`` metapackage import every family's.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NamedTuple

ENTRY_POINT_GROUP = "oasr.families"
CLI_ENTRY_POINT_GROUP = "oasr.cli"
BENCH_ENTRY_POINT_GROUP = "oasr.bench"


def _no_specs(arch) -> list:
    return []


class Family(NamedTuple):
    """What a kernel family tells the core about itself."""

    name: str  # "norm"
    version: str
    module: str  # the import name of its functional API, "oasr_norm"
    include_dir: Path  # its device headers (include/oasr/<family>/)
    #: arch -> the JitSpecs of its production modules for that architecture (what AOT builds)
    production_specs: Callable[[object], Sequence] = _no_specs
    #: public names re-exported by the `oasr` metapackage (oasr.<name>)
    exports: tuple[str, ...] = ()
    #: the architectures `production_specs` builds for (``("9.0a",)``); empty: any the family's
    #: ``production_specs`` returns modules for (``oasr jit`` then asks it, per architecture,
    #: to say which when it returns none for the one asked)
    supported_archs: tuple[str, ...] = ()

    def serves(self, arch) -> bool | None:
        """Whether the family declares ``arch`` (a `CudaArch`) as one it builds for; None when
        it declares no architectures."""
        if not self.supported_archs:
            return None
        from .arch import parse_arch

        return any(parse_arch(a)[:2] == tuple(arch)[:2] for a in self.supported_archs)


class FamilyRegistrationError(RuntimeError):
    pass


@functools.cache
def discover_families() -> dict[str, Family]:
    """Every installed family by name (entry points in group ``oasr.families``)."""
    from importlib.metadata import entry_points as find_entry_points

    families: dict[str, Family] = {}
    for ep in find_entry_points(group=ENTRY_POINT_GROUP):
        try:
            family = ep.load()
        except Exception as exc:
            raise FamilyRegistrationError(
                f"family entry point {ep.name} = {ep.value} failed to load: {exc}"
            ) from exc
        if callable(family) and not isinstance(family, Family):
            family = family()
        if not isinstance(family, Family):
            raise FamilyRegistrationError(
                f"family entry point {ep.name} = {ep.value} is not an oasr_jit.Family"
            )
        if family.name in families:
            other = families[family.name]
            if other != family:
                raise FamilyRegistrationError(
                    f"two installed packages register the family '{family.name}' "
                    f"({other.module} and {family.module}); uninstall one"
                )
        families[family.name] = family
    return dict(sorted(families.items()))


def entry_points(group: str) -> list:
    from importlib.metadata import entry_points as find_entry_points

    return sorted(find_entry_points(group=group), key=lambda ep: ep.name)


def lazy_package(package: str, names: dict[str, str], submodules: tuple[str, ...] = ()):
    """``(__getattr__, __dir__, __all__)`` for a family's ``__init__``: each public name is
    imported from its submodule on first use (``names``: public name -> submodule), so importing
    the package — as family discovery does, through its registration — imports nothing heavy::

        __getattr__, __dir__, __all__ = lazy_package(__name__, {"layer_norm": "norm"}, ("layers",))
    """
    import importlib
    import sys

    # A name exported from the submodule of the same name would be hidden by the submodule: the
    # import system binds a submodule to the package's attribute when it is first imported.
    hidden = sorted(n for n, module in names.items() if n == module)
    if hidden:
        raise ValueError(
            f"{package}: public names equal to the submodule defining them ({', '.join(hidden)}) "
            "are hidden by that submodule once imported; rename the submodule"
        )
    exported = ["__version__", *sorted(names), *submodules]

    def __getattr__(name: str):
        if name in names:
            value = getattr(importlib.import_module(f"{package}.{names[name]}"), name)
        elif name in submodules:
            value = importlib.import_module(f"{package}.{name}")
        else:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        setattr(sys.modules[package], name, value)  # later lookups skip __getattr__
        return value

    def __dir__() -> list[str]:
        # the public names only: not the package's imports (annotations, lazy_package) or tables
        return sorted(exported)

    return __getattr__, __dir__, exported
