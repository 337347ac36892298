"""The GEMM family's registration with the JIT core (cheap to import: no torch, no build)."""

from __future__ import annotations

from pathlib import Path

from oasr_jit import Family

from ._version import __version__

EXPORTS = (
    "gemm",
    "gemm_activation",
    "gemm_log_softmax",
    "bmm",
    "group_gemm",
    "select_default_config",
)


def _production_specs(arch):
    from ._jit import production_specs

    return production_specs(arch)


FAMILY = Family(
    name="gemm",
    version=__version__,
    module="oasr_gemm",
    include_dir=Path(__file__).resolve().parent / "include",
    production_specs=_production_specs,
    exports=EXPORTS,
)
