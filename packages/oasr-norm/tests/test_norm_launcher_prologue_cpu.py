"""The checks every norm launcher opens with (the core's tvm_ffi_utils.h: check_out_like,
check_param, optional_ptr), built into a host module with the real compiler and called on CPU
tensors: the errors a direct module call raises, each naming the tensor and the fix."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from oasr_jit import gen_jit_spec

DATA = Path(__file__).resolve().parent / "data"


@pytest.fixture(scope="module")
def probe(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("OASR_JIT_DIR", str(tmp_path_factory.mktemp("norm_prologue_jit")))
    try:
        return gen_jit_spec(
            "norm_prologue_probe", [DATA / "norm_prologue_probe.cc"]
        ).build_and_load()
    finally:
        mp.undo()


def test_out_like_accepts_the_output_of_x(probe):
    x = torch.zeros(4, 16)[:, :8]  # a row-strided input: only out must be contiguous
    probe.out_like(torch.zeros(4, 8), x)


@pytest.mark.parametrize(
    "out, error, message",
    [
        (torch.zeros(4, 8, dtype=torch.float16), TypeError, r"out \(float16\) and x \(float32\)"),
        (torch.zeros(4, 9), ValueError, r"out \[4, 9\] and x \[4, 8\] must have the same shape"),
        (torch.zeros(8, 4).t(), ValueError, r"out must be contiguous.*\.contiguous\(\)"),
    ],
)
def test_out_like_refuses(probe, out, error, message):
    with pytest.raises(error, match=message):
        probe.out_like(out, torch.zeros(4, 8))


def test_param_accepts_absent_and_matching(probe):
    x = torch.zeros(3, 8)
    probe.param(None, 8, x)
    probe.param(torch.ones(8), 8, x)
    probe.param(torch.ones(1, 8), 8, x)  # any shape of numel elements


@pytest.mark.parametrize(
    "weight, error, message",
    [
        (torch.ones(8, dtype=torch.bfloat16), TypeError, r"weight \(bfloat16\) and x \(float32\)"),
        (torch.ones(16)[::2], ValueError, r"weight must be contiguous"),
        (torch.ones(7), ValueError, r"weight must have 8 elements, got shape \[7\]"),
    ],
)
def test_param_refuses(probe, weight, error, message):
    with pytest.raises(error, match=message):
        probe.param(weight, 8, torch.zeros(3, 8))


def test_optional_ptr_is_the_first_element_or_null(probe):
    assert probe.points_at_first(None)
    assert probe.points_at_first(torch.ones(8)[3:])
