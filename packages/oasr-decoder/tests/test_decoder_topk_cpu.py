"""CPU tests of oasr_decoder.topk (run in CI, no GPU): argument validation, which must refuse
before the module is built, the public names, and a compile of the oasr_decoder_topk module for
sm_90a with the real nvcc. The kernel is tested in test_decoder_topk_gpu.py."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

import oasr_decoder
from oasr_decoder import _jit
from oasr_decoder.topk_cuda import MAX_K, TopK, _topk_indices_int32
from oasr_jit import is_complete_shared_object, parse_arch


class _CudaLooking(torch.Tensor):
    """A CPU tensor whose ``.device`` says cuda:0: the Python validation sees a CUDA tensor,
    while nothing reaches a kernel (a test that gets that far has already failed)."""

    @property
    def device(self):
        return torch.device("cuda", 0)


def _cuda_looking(t: torch.Tensor) -> torch.Tensor:
    return t.as_subclass(_CudaLooking)


@pytest.fixture
def no_module_build(monkeypatch):
    def refuse():
        raise AssertionError("oasr_decoder_topk was built before the arguments were refused")

    monkeypatch.setattr(_jit, "topk_module", refuse)


X = torch.randn(4, 300)


@pytest.mark.parametrize(
    "x, k, error, match",
    [
        (X, 5, ValueError, r"x must be a CUDA tensor, got device cpu; move it with \.cuda\(\)"),
        (X.numpy(), 5, TypeError, r"x must be a torch.Tensor \[\.\.\., V\], got ndarray"),
        (_cuda_looking(X.int()), 5, TypeError, "x has dtype torch.int32; supported: float32"),
        (_cuda_looking(X.double()), 5, TypeError, "supported: float32, float16 or bfloat16"),
        (_cuda_looking(torch.tensor(1.0)), 1, ValueError, "got a 0-D tensor"),
        (_cuda_looking(torch.randn(300, 4)).t(), 2, ValueError, "unit stride over V"),
        (_cuda_looking(torch.randn(4, 3, 5, 10))[::2, :, :2], 2, ValueError, "not a set of rows"),
        (_cuda_looking(X), 0, ValueError, "k must be at least 1, got 0"),
        (_cuda_looking(X), -3, ValueError, "k must be at least 1, got -3"),
        (_cuda_looking(X), 301, ValueError, r"k = 301 is larger than V = 300"),
        (_cuda_looking(X[:, :0]), 1, ValueError, r"larger than V = 0"),
        (_cuda_looking(X), MAX_K + 1, ValueError, r"at most 128, got 129; .* use torch.topk"),
        (_cuda_looking(X), True, TypeError, "k must be an int, got bool"),
        (_cuda_looking(X), 2.0, TypeError, "k must be an int, got float"),
        (_cuda_looking(X), "3", TypeError, "k must be an int, got str"),
    ],
)
def test_refuses_bad_arguments_before_building(x, k, error, match, no_module_build):
    with pytest.raises(error, match=match):
        oasr_decoder.topk(x, k)
    with pytest.raises(error, match=match):
        _topk_indices_int32(x, k)


def _out(values_dtype=torch.float32, indices_dtype=torch.int64, shape=(4, 5)):
    return (
        _cuda_looking(torch.empty(shape, dtype=values_dtype)),
        _cuda_looking(torch.empty(shape, dtype=indices_dtype)),
    )


@pytest.mark.parametrize(
    "out, error, match",
    [
        (_out()[0], TypeError, r"out must be a pair \(values, indices\) of tensors"),
        ((_out()[0],), TypeError, "out must be a pair"),
        ((_out()[0], [0]), TypeError, "out indices must be a torch.Tensor, got list"),
        (_out(values_dtype=torch.float16), TypeError, r"out values has dtype torch.float16"),
        (_out(indices_dtype=torch.int32), TypeError, r"it must be torch.int64"),
        (_out(shape=(4, 6)), ValueError, r"out values must have shape \(4, 5\), got \(4, 6\)"),
        (
            (_out()[0], _cuda_looking(torch.empty(5, 4, dtype=torch.int64)).t()),
            ValueError,
            "out indices must be contiguous",
        ),
        ((torch.empty(4, 5), _out()[1]), ValueError, "out values is on cpu but x is on cuda:0"),
    ],
)
def test_refuses_bad_out_before_building(out, error, match, no_module_build):
    with pytest.raises(error, match=match):
        oasr_decoder.topk(_cuda_looking(X), 5, out=out)


def test_k_accepts_integer_likes_and_result_type(no_module_build):
    # numpy integers pass the k check (a refusal below comes from the bad out, after k)
    with pytest.raises(ValueError, match="out values must have shape"):
        oasr_decoder.topk(_cuda_looking(X), np.int64(3), out=_out())
    assert TopK._fields == ("values", "indices")


def test_public_names_resolve_to_the_function_in_any_order():
    """`topk` is a function even when the module defining it is imported first."""
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            textwrap.dedent(
                """
                import oasr_decoder, oasr
                oasr_decoder.TopK
                import oasr_decoder.topk_cuda
                assert callable(oasr_decoder.topk) and oasr_decoder.topk.__name__ == "topk"
                assert oasr.topk is oasr_decoder.topk and oasr.TopK is oasr_decoder.TopK
                print("ok")
                """
            ),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0 and "ok" in proc.stdout, proc.stderr


@pytest.fixture
def hopper(monkeypatch):
    from oasr_jit import arch

    arch._reset_for_tests()
    monkeypatch.setenv("OASR_CUDA_ARCH_LIST", "9.0a")
    yield parse_arch("9.0a")
    arch._reset_for_tests()


@pytest.mark.skipif(
    shutil.which("nvcc") is None and not os.environ.get("CUDA_HOME"), reason="needs nvcc"
)
def test_topk_module_compiles_for_sm90a(hopper):
    spec = _jit.gen_topk_module()
    assert spec.name == "oasr_decoder_topk" and spec.is_cuda
    assert "-gencode=arch=compute_90a,code=sm_90a" in spec.plan().manifest["ninja"]
    assert is_complete_shared_object(spec.build())


@pytest.mark.skipif(
    shutil.which("nvcc") is None and not os.environ.get("CUDA_HOME"), reason="needs nvcc"
)
def test_team_width_rule(tmp_path):
    """topk_team_warps (host code of topk.cuh, compiled here with nvcc and run without a GPU):
    the widest team whose rows' warps fit at 32 per SM, each warp with half a batch of loads.
    The H200 numbers behind it are in docs/perf/h200.md ("Few rows")."""
    from oasr_jit.env import OASR_JIT_INCLUDE_DIR
    from oasr_jit.toolchain import nvcc

    cases = [  # rows, V, bytes per element, SMs -> warps per row
        (64, 5000, 4, 132, 8),  # a streaming chunk's frame: W 8 (12.9 us against 39.9 for W 1)
        (528, 5000, 4, 132, 8),  # 528 * 8 = 4224 = 132 * 32 warps: the last row count for W 8
        (529, 5000, 4, 132, 4),
        (1024, 5000, 4, 132, 4),  # 64 streams x 16 frames
        (2112, 5000, 4, 132, 2),
        (2113, 5000, 4, 132, 1),
        (4000, 5000, 4, 132, 1),  # the offline decode: one warp a row
        (64, 5000, 2, 132, 8),  # 625 16-byte vectors: half a batch for each of 8 warps
        (64, 500, 4, 132, 1),  # 125 vectors: not half a batch for 2 warps
        (64, 1024, 4, 132, 4),  # 256 vectors: half a batch (2 a lane) for 4 warps, not for 8
        (1, 16384, 2, 132, 8),
        (64, 5000, 4, 16, 8),  # 16 SMs: 64 rows x 8 warps = 512 = 16 x 32, still fits
        (65, 5000, 4, 16, 4),
    ]
    source = tmp_path / "team_width.cu"
    calls = "\n".join(
        f'  std::printf("%d\\n", oasr::decoder::topk_team_warps({r}, {v}, {b}, {s}));'
        for r, v, b, s, _ in cases
    )
    source.write_text(
        '#include <cstdio>\n#include "oasr/decoder/topk.cuh"\nint main() {\n' + calls + "\n}\n"
    )
    exe = tmp_path / "team_width"
    build = subprocess.run(
        [
            nvcc().path,
            "-std=c++17",
            "--expt-relaxed-constexpr",
            f"-I{OASR_JIT_INCLUDE_DIR}",
            f"-I{_jit.INCLUDE_DIR}",
            str(source),
            "-o",
            str(exe),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert build.returncode == 0, build.stderr
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert [int(line) for line in run.stdout.split()] == [case[-1] for case in cases]
