"""oasr-norm: normalization, activation and softmax kernels for speech models.

Every op takes CUDA tensors (float32, float16, bfloat16), normalizes or activates over the last
dimension of an N-D input, writes into ``out=`` when given, and has a PyTorch twin with the same
contract in `oasr_norm.twins`. The `oasr_norm.layers` modules use the kernels on CUDA and the
twins elsewhere.

Submodules are imported on first use: the JIT core imports this package's registration
(`oasr_norm._family`) to list the family, and that must not import torch.
"""

from __future__ import annotations

from oasr_jit.families import lazy_package

from ._family import OPS, SUBMODULES
from ._version import __version__  # noqa: F401

__getattr__, __dir__, __all__ = lazy_package(__name__, OPS, SUBMODULES)
