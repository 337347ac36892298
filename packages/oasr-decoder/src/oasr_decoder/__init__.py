"""oasr-decoder: CTC decoding for speech recognition.

On the CPU (host C++ compiled on first use by oasr-jit, no CUDA needed): greedy search, prefix
beam search with n-best, blank skipping and phrase boosting (`ContextGraph`), streaming
(`CtcStreamingDecoder`), and batches decoded with the GIL released. In pure Python: alignment
utilities (token spans, SentencePiece word grouping, times in seconds).

Submodules are imported on first use: the JIT core imports this package's registration
(`oasr_decoder._family`) to list the family, and that must not import torch.
"""

from __future__ import annotations

from oasr_jit.families import lazy_package

from ._family import OPS, SUBMODULES
from ._version import __version__  # noqa: F401

__getattr__, __dir__, __all__ = lazy_package(__name__, OPS, SUBMODULES)
