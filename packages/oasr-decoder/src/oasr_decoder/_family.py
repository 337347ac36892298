"""The decoder family's registration with the JIT core (cheap to import: no torch, no build)."""

from __future__ import annotations

from pathlib import Path

from oasr_jit import Family

from ._version import __version__

EXPORTS = (
    # CTC decoders (CPU)
    "CtcGreedySearch",
    "CtcPrefixBeamSearch",
    "CtcStreamingDecoder",
    "ContextGraph",
    "Hypothesis",
    "ctc_greedy_search",
    "ctc_prefix_beam_search",
    # CTC decoders (GPU)
    "CtcDecodeResult",
    "GpuStreamingDecoder",
    "ctc_beam_search_decode",
    "ctc_greedy_decode",
    # alignment
    "TokenSpan",
    "WordSpan",
    "path_to_spans",
    "hypothesis_spans",
    "group_words",
    # top-k (GPU)
    "topk",
    "TopK",
)


def _production_specs(arch):
    from ._jit import production_specs

    return production_specs(arch)


FAMILY = Family(
    name="decoder",
    version=__version__,
    module="oasr_decoder",
    include_dir=Path(__file__).resolve().parent / "include",
    production_specs=_production_specs,
    exports=EXPORTS,
)
