"""Argument checks every family's functional API shares (imports torch: family code only).

Each raises TypeError / ValueError naming the argument and the fix, before anything reaches a
launcher (which checks again).
"""

from __future__ import annotations

import torch

FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
HALF_DTYPES = (torch.float16, torch.bfloat16)

_DTYPE_NAMES = {torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16"}


def dtype_names(dtypes) -> str:
    """'float32, float16 or bfloat16' for error messages."""
    names = [_DTYPE_NAMES.get(d, str(d).removeprefix("torch.")) for d in dtypes]
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"


def check_tensor(
    t,
    name: str,
    *,
    dtypes=FLOAT_DTYPES,
    device_type: str | None = "cuda",
    elsewhere: str = "",
    shape_hint: str = "",
) -> None:
    """``t`` is a torch.Tensor of one of ``dtypes`` on a ``device_type`` device.

    ``elsewhere`` names what to use instead on another device (e.g. "the PyTorch twin in
    oasr_norm.twins"), ``shape_hint`` the expected shape for the type error ("[B, T, V]").
    """
    if not isinstance(t, torch.Tensor):
        shape = f" {shape_hint}" if shape_hint else ""
        raise TypeError(f"{name} must be a torch.Tensor{shape}, got {type(t).__name__}")
    if device_type is not None and t.device.type != device_type:
        move = ".cuda()" if device_type == "cuda" else f".to({device_type!r})"
        instead = f" (on {t.device.type} use {elsewhere})" if elsewhere else ""
        raise ValueError(
            f"{name} must be a {device_type.upper() if device_type == 'cuda' else device_type} "
            f"tensor, got device {t.device}; move it with {move}{instead}"
        )
    if t.dtype not in dtypes:
        raise TypeError(f"{name} has dtype {t.dtype}; supported: {dtype_names(dtypes)}")
