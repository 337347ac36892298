"""oasr-decoder: CTC decoding for speech recognition.

On the CPU (host C++ compiled on first use by oasr-jit, no CUDA needed): greedy search, prefix
beam search with n-best, blank skipping and phrase boosting (`ContextGraph`), streaming
(`CtcStreamingDecoder`), and batches decoded with the GIL released. In pure Python: alignment
utilities (token spans, SentencePiece word grouping, times in seconds).

Submodules are imported on first use: the JIT core imports this package's registration
(`oasr_decoder._family`) to list the family, and that must not import torch.
"""

from __future__ import annotations

import importlib

from ._version import __version__

# public name -> submodule defining it
_NAMES = {
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
    **dict.fromkeys(
        ("TokenSpan", "WordSpan", "path_to_spans", "hypothesis_spans", "group_words"),
        "alignment",
    ),
}
_SUBMODULES = ("ctc", "alignment")

__all__ = ["__version__", *sorted(_NAMES), *_SUBMODULES]


def __getattr__(name: str):
    if name in _NAMES:
        value = getattr(importlib.import_module(f"{__name__}.{_NAMES[name]}"), name)
    elif name in _SUBMODULES:
        value = importlib.import_module(f"{__name__}.{name}")
    else:
        raise AttributeError(f"module 'oasr_decoder' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
