"""oasr-norm: normalization, activation and softmax kernels for speech models.

Every op takes CUDA tensors (float32, float16, bfloat16), normalizes or activates over the last
dimension of an N-D input, writes into ``out=`` when given, and has a PyTorch twin with the same
contract in `oasr_norm.twins`. The `oasr_norm.layers` modules use the kernels on CUDA and the
twins elsewhere.

Submodules are imported on first use: the JIT core imports this package's registration
(`oasr_norm._family`) to list the family, and that must not import torch.
"""

from __future__ import annotations

import importlib

from ._version import __version__

# public name -> submodule defining it
_OPS = {
    **dict.fromkeys(
        ("layer_norm", "rms_norm", "add_layer_norm", "add_rms_norm", "bias_norm",
         "batch_norm1d", "fold_batch_norm", "group_norm"),
        "norm",
    ),
    **dict.fromkeys(
        ("gelu", "gelu_tanh", "sigmoid", "tanh", "relu", "swish", "swoosh_l", "swoosh_r", "glu"),
        "activation",
    ),
    **dict.fromkeys(("softmax", "log_softmax", "masked_softmax"), "softmax"),
}  # fmt: skip
_SUBMODULES = ("layers", "twins", "bench")

__all__ = ["__version__", *sorted(_OPS), *_SUBMODULES]


def __getattr__(name: str):
    if name in _OPS:
        value = getattr(importlib.import_module(f"{__name__}.{_OPS[name]}"), name)
    elif name in _SUBMODULES:
        value = importlib.import_module(f"{__name__}.{name}")
    else:
        raise AttributeError(f"module 'oasr_norm' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
