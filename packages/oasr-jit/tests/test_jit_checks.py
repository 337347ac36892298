"""oasr_jit.checks: the argument checks every family's functional API shares."""

from __future__ import annotations

import pytest
import torch

from oasr_jit.checks import HALF_DTYPES, check_tensor, dtype_names


def test_a_cuda_float_tensor_passes_and_a_cpu_one_names_the_move():
    x = torch.ones(4)
    check_tensor(x, "x", device_type=None)
    with pytest.raises(ValueError, match=r"x must be a CUDA tensor, got device cpu; .*\.cuda\(\)"):
        check_tensor(x, "x")
    with pytest.raises(ValueError, match="on cpu use oasr_norm.twins"):
        check_tensor(x, "x", elsewhere="oasr_norm.twins")


def test_type_and_dtype_errors_name_the_argument_and_the_supported_set():
    with pytest.raises(TypeError, match=r"A must be a torch.Tensor \[M, K\], got list"):
        check_tensor([1.0], "A", shape_hint="[M, K]")
    with pytest.raises(
        TypeError, match="A has dtype torch.float32; supported: float16 or bfloat16"
    ):
        check_tensor(torch.ones(2), "A", dtypes=HALF_DTYPES, device_type=None)
    with pytest.raises(TypeError, match="supported: float32, float16 or bfloat16"):
        check_tensor(torch.ones(2, dtype=torch.int32), "x", device_type="cpu")


def test_dtype_names_reads_as_a_list():
    assert dtype_names((torch.float16,)) == "float16"
    assert dtype_names((torch.int32, torch.int64)) == "int32 or int64"
