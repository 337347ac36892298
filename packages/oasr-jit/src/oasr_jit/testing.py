"""Test helpers every family shares: the GPU skip, per-dtype tolerances, output poisoning.

Imports torch and pytest: use it from tests only.
"""

from __future__ import annotations

import pytest
import torch

#: (rtol, atol) per dtype for results computed in float and rounded once to the output dtype.
#: Families loosen these per op with a comment saying why.
TOLERANCES = {
    torch.float32: (1e-5, 1e-5),
    torch.float16: (1e-3, 1e-3),
    torch.bfloat16: (8e-3, 8e-3),
}


def gpu_capability() -> int | None:
    """Compute capability of the current GPU as an int (90), or None without one."""
    if not torch.cuda.is_available():
        return None
    major, minor = torch.cuda.get_device_capability()
    return major * 10 + minor


def skip_unless_gpu(min_capability: int | None = None, reason: str = ""):
    """The one capability skip: ``@skip_unless_gpu(90, "wgmma")`` on a test or a class."""
    cc = gpu_capability()
    if cc is None:
        return pytest.mark.skip(reason="needs a CUDA GPU")
    if min_capability is not None and cc < min_capability:
        why = f" for {reason}" if reason else ""
        return pytest.mark.skip(reason=f"needs sm_{min_capability}+{why}, this GPU is sm_{cc}")
    return pytest.mark.gpu


def poison_(tensor: torch.Tensor) -> torch.Tensor:
    """Fill an output with a value no kernel produces by accident (NaN, or the integer minimum),
    so an element the kernel never wrote fails the comparison."""
    if tensor.is_floating_point():
        return tensor.fill_(float("nan"))
    if tensor.dtype == torch.bool:
        return tensor.fill_(True)
    return tensor.fill_(torch.iinfo(tensor.dtype).min)


def poisoned(shape, *, dtype, device="cuda") -> torch.Tensor:
    return poison_(torch.empty(shape, dtype=dtype, device=device))


def assert_close(actual: torch.Tensor, expected: torch.Tensor, dtype=None, **overrides) -> None:
    """``torch.testing.assert_close`` at the dtype's (rtol, atol) unless overridden."""
    rtol, atol = TOLERANCES[dtype or actual.dtype]
    torch.testing.assert_close(
        actual, expected, rtol=overrides.get("rtol", rtol), atol=overrides.get("atol", atol)
    )
