"""Helpers of the activation and softmax tests (imported by name; see tests/test_repository.py):
dtypes, the one tolerance dict, a CPU tensor that reports a CUDA device (so argument validation
runs without a GPU), and a guard that fails a test if any JIT module is built."""

from __future__ import annotations

import contextlib

import torch

from oasr_norm import _jit

DTYPES = [torch.float32, torch.float16, torch.bfloat16]

# (rtol, atol) of a kernel (or twin) against its reference. Both sides compute in float32 and
# round once to the output dtype, so they may differ by one ulp of that dtype where the float
# values straddle a rounding boundary: fp16 one ulp is <= 2^-10 |y| (rtol 1e-3), bf16 <= 2^-7 |y|
# (rtol 8e-3). float32: the kernel's exp2/erf/tanh and torch's differ by a few ulps; the Swoosh
# softplus is accurate to ~3e-7 absolute; softmax sums run in another order. All inside 1e-5.
TOLERANCES = {
    torch.float32: (1e-5, 1e-5),
    torch.float16: (1e-3, 1e-3),
    torch.bfloat16: (8e-3, 8e-3),
}


def assert_close(actual: torch.Tensor, expected: torch.Tensor, **kwargs) -> None:
    rtol, atol = TOLERANCES[expected.dtype]
    torch.testing.assert_close(actual, expected, rtol=rtol, atol=atol, **kwargs)


class CudaLooking(torch.Tensor):
    """A CPU tensor whose ``.device`` says cuda:0: the ops' Python validation sees a CUDA tensor,
    while nothing ever reaches a kernel (a test that gets that far has already failed)."""

    @property
    def device(self):
        return torch.device("cuda", 0)


def cuda_looking(t: torch.Tensor) -> torch.Tensor:
    return t.as_subclass(CudaLooking)


@contextlib.contextmanager
def no_module_builds(monkeypatch):
    """Within the block, building or loading any norm-family module fails the test."""

    def refuse(kind):
        raise AssertionError(f"module {kind!r} was built before the arguments were refused")

    with monkeypatch.context() as m:
        m.setattr(_jit, "module", refuse)
        yield
