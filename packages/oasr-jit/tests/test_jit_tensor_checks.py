"""The launcher-side checks of csrc/tvm_ffi_utils.h, compiled into a host module and called on
CPU tensors: the exact storage-overlap test (against brute force), the row view, alignment,
dtype dispatch and the errors' types and wording."""

from __future__ import annotations

import random

import pytest
import torch
from jit_helpers import DATA, requires_nvcc

from oasr_jit import gen_jit_spec, toolchain

pytestmark = requires_nvcc  # the probe includes the CUDA toolkit's fp16/bf16 headers


@pytest.fixture(scope="module")
def probe(tmp_path_factory):
    import os

    old = os.environ.get("OASR_JIT_DIR")
    os.environ["OASR_JIT_DIR"] = str(tmp_path_factory.mktemp("probe_jit"))
    try:
        include = toolchain.nvcc().toolkit_root / "include"
        spec = gen_jit_spec("check_probe", [DATA / "check_probe.cc"], extra_cflags=[f"-I{include}"])
        return spec.build_and_load()
    finally:
        if old is None:
            del os.environ["OASR_JIT_DIR"]
        else:
            os.environ["OASR_JIT_DIR"] = old


def brute_force_overlap(a: torch.Tensor, b: torch.Tensor) -> bool:
    def byte_set(t):
        if t.numel() == 0:
            return set()
        base = t.data_ptr()
        es = t.element_size()
        idx = torch.zeros(t.shape, dtype=torch.int64)
        for d, (size, stride) in enumerate(zip(t.shape, t.stride(), strict=True)):
            shape = [1] * t.dim()
            shape[d] = size
            idx = idx + (torch.arange(size) * stride).view(shape)
        out = set()
        for off in idx.flatten().tolist():
            out.update(range(base + off * es, base + off * es + es))
        return out

    return bool(byte_set(a) & byte_set(b))


def test_column_halves_do_not_overlap(probe):
    buf = torch.zeros(64, 256)
    left, right = buf[:, :128], buf[:, 128:]
    assert not probe.overlaps(left, right)
    assert probe.overlaps(buf[:, 100:200], right)
    assert probe.overlaps(buf, left)
    assert not probe.overlaps(buf[:32], buf[32:])
    assert probe.overlaps(buf[:33], buf[32:])
    # Interleaved rows of one buffer, different row strides.
    assert not probe.overlaps(buf[0::2, :128], buf[1::2, :128])
    assert probe.overlaps(buf[0::2, :128], buf[0::3, :128])
    assert not probe.overlaps(torch.zeros(3), torch.zeros(3))
    assert not probe.overlaps(buf[:0], buf)


def test_overlap_matches_brute_force_on_random_views(probe):
    rng = random.Random(1234)
    buf = torch.zeros(4096)
    checked = 0
    for _ in range(400):
        views = []
        for _ in range(2):
            cols = rng.randint(1, 24)
            row_stride = rng.randint(cols, 40)
            rows = rng.randint(1, 12)
            offset = rng.randint(0, 200)
            if rng.random() < 0.2:  # a 3-D view with uniform rows
                views.append(
                    buf.as_strided((2, rows, cols), (rows * row_stride, row_stride, 1), offset)
                )
            elif rng.random() < 0.1:  # a non-row layout: transposed columns
                views.append(buf.as_strided((rows, cols), (1, row_stride), offset))
            else:
                views.append(buf.as_strided((rows, cols), (row_stride, 1), offset))
        exact = brute_force_overlap(*views)
        got = probe.overlaps(*views)
        if views[0].stride()[-1] == 1 and views[1].stride()[-1] == 1:
            assert got == exact, (
                views[0].shape,
                views[0].stride(),
                views[0].storage_offset(),
                views[1].shape,
                views[1].stride(),
                views[1].storage_offset(),
            )
            checked += 1
        else:
            assert got or not exact, "the conservative path may over-report, never miss"
    assert checked > 300


def test_no_overlap_check_message(probe):
    buf = torch.zeros(8, 8)
    with pytest.raises(ValueError, match="out shares storage with in; .*separate output"):
        probe.no_overlap(buf[:, :5], buf[:, 4:])
    probe.no_overlap(buf[:, :4], buf[:, 4:])


@pytest.mark.parametrize(
    "make, expected",
    [
        (lambda: torch.zeros(2, 3, 8), [6, 8, 8]),
        (lambda: torch.zeros(4, 16)[:, :8], [4, 8, 16]),
        (lambda: torch.zeros(2, 3, 16)[:, :, 4:12], [6, 8, 16]),
        (lambda: torch.zeros(10, 8)[::2], [5, 8, 16]),
        (lambda: torch.zeros(5), [1, 5, 5]),
        (lambda: torch.zeros(0, 7), [0, 7, 7]),
        (lambda: torch.zeros(3, 1, 4), [3, 4, 4]),
        (lambda: torch.zeros(2, 0, 8), [0, 8, 8]),
        (lambda: torch.zeros(4, 16)[:, :8].t()[:0], [0, 4, 4]),
    ],
)
def test_rows_of_regular_views(probe, make, expected):
    assert list(probe.rows_of(make())) == expected


@pytest.mark.parametrize(
    "make",
    [lambda: torch.zeros(8, 4).t(), lambda: torch.zeros(3, 4, 8)[:, :2, :].transpose(0, 1)],
)
def test_rows_of_irregular_views_raise(probe, make):
    with pytest.raises(ValueError, match=r"\.contiguous\(\)"):
        probe.rows_of(make())


def test_alignment(probe):
    buf = torch.zeros(4096, dtype=torch.float16)
    assert probe.aligned_16(buf[:64].view(8, 8))
    assert not probe.aligned_16(buf[1:65].view(8, 8)), "base off by 2 bytes"
    assert not probe.aligned_16(buf[: 8 * 12].view(8, 12)), "row of 24 bytes"
    assert probe.aligned_16(buf[: 16 * 16].view(16, 16)[:, :8]), "a 16-byte-aligned slice"
    assert probe.aligned_16(buf[:7]), "row length is the kernel's business, not alignment"
    with pytest.raises(ValueError, match="16-byte aligned.*multiple of 8 elements"):
        probe.require(buf[1:9], "aligned_16")


def test_check_errors_name_the_tensor_and_fix(probe):
    with pytest.raises(TypeError, match="t has dtype int32; supported: float32, float16, bfloat16"):
        probe.require(torch.zeros(3, dtype=torch.int32), "float")
    with pytest.raises(ValueError, match=r"t must be contiguous.*\.contiguous\(\)"):
        probe.require(torch.zeros(4, 4).t(), "contiguous")
    with pytest.raises(ValueError, match="unit stride in its last dimension"):
        probe.require(torch.zeros(4, 4).t(), "last_dim_contiguous")
    with pytest.raises(ValueError, match=r"t must be 2-D, got shape \[2, 3, 4\]"):
        probe.require(torch.zeros(2, 3, 4), "2d")
    with pytest.raises(ValueError, match=r"t must be a CUDA tensor.*\.cuda\(\)"):
        probe.require(torch.zeros(2), "cuda")
    probe.require(torch.zeros(4, 4), "contiguous")


@pytest.mark.parametrize(
    "dtype, size", [(torch.float32, 4), (torch.float16, 2), (torch.bfloat16, 2)]
)
def test_dispatch_macro(probe, dtype, size):
    assert probe.dispatched_size(torch.zeros(1, dtype=dtype)) == size


def test_dispatch_macro_refuses_other_dtypes(probe):
    with pytest.raises(TypeError, match="t has dtype float64"):
        probe.dispatched_size(torch.zeros(1, dtype=torch.float64))
