"""The GEMM family's registration with the JIT core (cheap to import: no torch, no build)."""

from __future__ import annotations

from pathlib import Path

from oasr_jit import Family

from ._version import __version__

#: public name -> the submodule defining it: the package's lazy table (`__init__`) and the
#: names the `oasr` metapackage re-exports, one list. Selection internals (`bmm_lane`,
#: `tier_counts`, `rule_miss_report`, `GEMM_MIN_ROWS`) are `oasr_gemm.selection.<name>`.
OPS = {
    **dict.fromkeys(("gemm", "gemm_activation", "VariantUnsupportedError"), "dense"),
    "gemm_log_softmax": "head",
    "bmm": "batched",
    "group_gemm": "grouped",
    "select_default_config": "selection",
}

#: submodules reachable as attributes of the package
SUBMODULES = ("configs", "twins", "selection")

#: the compute capabilities the family serves: sm_90 with both lanes (CUTLASS 3.x TMA + wgmma and
#: the CUTLASS 2.x mma.sync lane), the others with the 2.x lane (configs.lanes(), docs/gemm.md)
SUPPORTED_COMPUTE_CAPABILITY = (80, 86, 89, 90, 100, 120)


def _production_specs(arch):
    from ._jit import production_specs

    return production_specs(arch)


FAMILY = Family(
    name="gemm",
    version=__version__,
    module="oasr_gemm",
    include_dir=Path(__file__).resolve().parent / "include",
    production_specs=_production_specs,
    exports=tuple(OPS),
    supported_compute_capability=SUPPORTED_COMPUTE_CAPABILITY,
)
