"""Helpers of the norm family's tests (imported by name; see tests/test_repository.py)."""

from __future__ import annotations

import torch

DTYPES = [torch.float32, torch.float16, torch.bfloat16]

# (rtol, atol) of a kernel against its float32 twin: one rounding of the output each, so results
# may differ by an ulp where the float values straddle a rounding boundary. The fp16 atol covers
# one ulp at |y| ~ 4 (normalized values); bf16 likewise with its 8 mantissa bits.
TOLERANCES = {
    torch.float32: (2e-5, 2e-5),
    torch.float16: (1e-3, 2e-3),
    torch.bfloat16: (8e-3, 1.6e-2),
}

# Widths: 1, odd sizes off the vector width, ASR widths (Zipformer 192/384, Conformer 256/512,
# FastConformer 1024, Whisper 1280), the register-shape boundaries, and past the largest
# register-resident row (fp32: 16384 columns) so the looped kernel runs too.
WIDTHS = [1, 7, 64, 80, 111, 192, 256, 384, 512, 1024, 1280, 2048, 4096, 8192, 20000]
ROWS = [1, 3, 257]


def assert_close(actual: torch.Tensor, expected: torch.Tensor) -> None:
    rtol, atol = TOLERANCES[expected.dtype]
    torch.testing.assert_close(actual, expected, rtol=rtol, atol=atol)
