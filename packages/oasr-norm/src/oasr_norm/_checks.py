"""Argument validation shared by the family's ops: cheap checks that raise ValueError/TypeError
naming the argument and the fix, before anything reaches a launcher (which checks again)."""

from __future__ import annotations

import torch

FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16)

#: the activations a norm can apply in its epilogue (the launcher's integer code is the index)
NORM_ACTIVATIONS = (
    None, "swish", "relu", "gelu", "gelu_tanh", "sigmoid", "tanh", "swoosh_l", "swoosh_r",
)  # fmt: skip


def check_input(x: torch.Tensor, name: str = "x", *, min_dim: int = 1) -> None:
    """A floating CUDA tensor with a unit-stride last dimension."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if x.device.type != "cuda":
        raise ValueError(
            f"{name} must be a CUDA tensor, got device {x.device}; move it with .cuda() "
            "(on the CPU use the PyTorch twin in oasr_norm.twins)"
        )
    if x.dtype not in FLOAT_DTYPES:
        raise TypeError(f"{name} has dtype {x.dtype}; supported: float32, float16, bfloat16")
    if x.dim() < min_dim:
        raise ValueError(
            f"{name} must have at least {min_dim} dimensions, got shape {tuple(x.shape)}"
        )
    if x.dim() and x.shape[-1] > 1 and x.stride(-1) != 1:
        raise ValueError(
            f"{name} must have a unit stride in its last dimension, got strides {x.stride()}; "
            "call .contiguous()"
        )


def check_like(t: torch.Tensor | None, x: torch.Tensor, name: str, shape: tuple) -> None:
    """A parameter or second input: same device and dtype as x, the given shape."""
    if t is None:
        return
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if t.device != x.device:
        raise ValueError(f"{name} is on {t.device} but x is on {x.device}; move it to {x.device}")
    if t.dtype != x.dtype:
        raise TypeError(
            f"{name} has dtype {t.dtype} but x has {x.dtype}; cast it with .to(x.dtype)"
        )
    if tuple(t.shape) != tuple(shape):
        raise ValueError(f"{name} must have shape {tuple(shape)}, got {tuple(t.shape)}")


def output(
    out: torch.Tensor | None, x: torch.Tensor, shape: tuple | None = None, name: str = "out"
) -> torch.Tensor:
    """``out`` checked (contiguous, x's dtype and device, the shape), or a new tensor."""
    shape = tuple(x.shape) if shape is None else tuple(shape)
    if out is None:
        return torch.empty(shape, dtype=x.dtype, device=x.device)
    if not isinstance(out, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(out).__name__}")
    if out.device != x.device:
        raise ValueError(f"{name} is on {out.device} but x is on {x.device}")
    if out.dtype != x.dtype:
        raise TypeError(f"{name} has dtype {out.dtype} but x has {x.dtype}")
    if tuple(out.shape) != shape:
        raise ValueError(f"{name} must have shape {shape}, got {tuple(out.shape)}")
    if not out.is_contiguous():
        raise ValueError(f"{name} must be contiguous, got strides {out.stride()}")
    return out


def activation_code(activation: str | None) -> int:
    if activation not in NORM_ACTIVATIONS:
        names = ", ".join(repr(a) for a in NORM_ACTIVATIONS)
        raise ValueError(f"activation must be one of {names}, got {activation!r}")
    return NORM_ACTIVATIONS.index(activation)
