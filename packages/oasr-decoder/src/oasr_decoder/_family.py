"""The decoder family's registration with the JIT core (cheap to import: no torch, no build)."""

from __future__ import annotations

from pathlib import Path

from oasr_jit import Family

from ._version import __version__

#: public name -> the submodule defining it: the package's lazy table (`__init__`) and the
#: names the `oasr` metapackage re-exports, one list
OPS = {
    **dict.fromkeys(
        (
            "CtcGreedySearch",
            "CtcPrefixBeamSearch",
            "CtcStreamingDecoder",
            "ContextGraph",
            "Hypothesis",
            "ctc_greedy_search",
            "ctc_prefix_beam_search",
        ),
        "ctc",
    ),
    "CtcDecodeResult": "ctc_cuda",
    **dict.fromkeys(
        ("TokenSpan", "WordSpan", "path_to_spans", "hypothesis_spans", "group_words"),
        "alignment",
    ),
    **dict.fromkeys(("topk", "TopK"), "topk_cuda"),
}

#: submodules reachable as attributes of the package
SUBMODULES = ("ctc", "ctc_cuda", "alignment", "topk_cuda", "twins")

#: the compute capabilities the family's CUDA modules serve (its kernels use no
#: architecture-specific feature; the CPU decoders need no GPU)
SUPPORTED_COMPUTE_CAPABILITY = (80, 86, 89, 90, 100, 120)


def _production_specs(arch):
    from ._jit import production_specs

    return production_specs(arch)


FAMILY = Family(
    name="decoder",
    version=__version__,
    module="oasr_decoder",
    include_dir=Path(__file__).resolve().parent / "include",
    production_specs=_production_specs,
    exports=tuple(OPS),
    supported_compute_capability=SUPPORTED_COMPUTE_CAPABILITY,
)
