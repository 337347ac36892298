"""oasr-gemm: GEMMs with fused epilogues for speech models (sm90: CUTLASS 3.x, TMA + wgmma).

`gemm(A, B, C=None)` computes A · Bᵀ (+ bias or matrix C), `gemm_activation` adds an activation
in the epilogue, and `gemm_log_softmax` is the CTC head (log_softmax over the vocabulary); fp16
and bf16 CUDA tensors, B in the ``nn.Linear`` weight layout. `bmm(A, B)` is batched A · B with
torch.matmul's broadcasting, on strided views of any extent; `group_gemm(A, B, offsets)` runs
one GEMM per row segment of A with its own weight. Which kernel runs is `select_default_config`'s
choice (the tuning database, then the default config). The twins (`oasr_gemm.twins`) run the
same contract through PyTorch.

Submodules are imported on first use: the JIT core imports the registration (`oasr_gemm._family`)
to list the family, and that must not import torch.
"""

from __future__ import annotations

from oasr_jit.families import lazy_package

from ._family import OPS, SUBMODULES
from ._version import __version__  # noqa: F401

__getattr__, __dir__, __all__ = lazy_package(__name__, OPS, SUBMODULES)
