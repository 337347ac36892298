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
    #: the compute capabilities the family serves (``(80, 86, 89, 90, 100, 120)``: sm_80 ...
    #: sm_120), whatever the suffix (9.0 and 9.0a are both 90). Empty: the family declares none
    #: (``oasr jit`` then asks ``production_specs``, per architecture, which it builds for)
    supported_compute_capability: tuple[int, ...] = ()

    def supports(self, arch) -> bool:
        """Whether the family serves ``arch`` (a `CudaArch`); True when it declares none."""
        if not self.supported_compute_capability:
            return True
        return _capability(arch) in self.supported_compute_capability

    def unsupported_reason(self, arch) -> str | None:
        """Why the family cannot build for ``arch``, in one line naming the supported set and
        the fix; None when it serves it."""
        if self.supports(arch):
            return None
        have = _capability(arch)
        served = ", ".join(f"sm_{cc}" for cc in self.supported_compute_capability)
        return (
            f"the {self.name} family ({self.module} {self.version}) does not serve sm_{have} "
            f"(compute capability {have // 10}.{have % 10}); it serves {served}: run it on one "
            "of those GPUs, or set OASR_CUDA_ARCH_LIST (or --arch) to one of them"
        )

    def require_arch(self, arch) -> None:
        """Raise `UnsupportedArchitectureError` (`unsupported_reason`) unless the family serves
        ``arch``."""
        reason = self.unsupported_reason(arch)
        if reason is not None:
            raise UnsupportedArchitectureError(reason)


def _capability(arch) -> int:
    major, minor = tuple(arch)[:2]
    return int(major) * 10 + int(minor)


class UnsupportedArchitectureError(RuntimeError):
    """A family was asked to build for an architecture it does not declare."""


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


def family_of_module(name: str) -> Family | None:
    """The installed family a JIT module belongs to, by its name (``oasr_<family>`` or
    ``oasr_<family>_...``); None for a module of no installed family."""
    try:
        families = discover_families()
    except FamilyRegistrationError:
        return None  # reported by `oasr jit`; a module of no family still builds
    for fam_name in sorted(families, key=len, reverse=True):
        prefix = f"oasr_{fam_name}"
        if name == prefix or name.startswith(prefix + "_"):
            return families[fam_name]
    return None


def require_module_arch(name: str, arch) -> None:
    """Raise `UnsupportedArchitectureError` when the family owning module ``name`` does not
    serve ``arch``: the first CUDA build of a process asks (`JitSpec.plan`)."""
    fam = family_of_module(name)
    if fam is not None:
        fam.require_arch(arch)


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
