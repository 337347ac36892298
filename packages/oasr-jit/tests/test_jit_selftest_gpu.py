"""GPU: the core's self-test module run on the device — shared headers (vector access, block
reduction, arch helpers) and launcher conventions (checks, device scope, the caller's stream,
CUDA-graph capture, refusals that leave the context healthy)."""

from __future__ import annotations

import pytest
import torch

from oasr_jit.selftest import gen_selftest_module
from oasr_jit.testing import gpu_capability, poison_, poisoned, skip_unless_gpu

pytestmark = skip_unless_gpu()

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
# Row widths: 1, odd, off the 128-bit vector width, ASR widths, past one block's stride.
COLS = [1, 7, 64, 80, 111, 192, 256, 512, 1280, 4096, 8195]


@pytest.fixture(scope="module")
def selftest():
    return gen_selftest_module().build_and_load()


def test_device_code_is_the_target_arch(selftest):
    out = torch.zeros(1, dtype=torch.int32, device="cuda")
    selftest.compiled_sm(out)
    assert out.item() == gpu_capability()
    assert selftest.target_sm() == gpu_capability()
    assert selftest.sm_count(0) == torch.cuda.get_device_properties(0).multi_processor_count


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("cols", COLS)
@pytest.mark.parametrize("rows", [1, 3, 1000])
def test_row_sum(selftest, dtype, cols, rows):
    x = torch.randn(rows, cols, device="cuda").to(dtype)
    out = poisoned((rows,), dtype=torch.float32)
    selftest.row_sum(out, x)
    want = x.double().sum(1).float()
    torch.testing.assert_close(out, want, rtol=1e-4, atol=1e-3 * cols**0.5)


@pytest.mark.parametrize("dtype", DTYPES)
def test_row_sum_strided_and_unaligned_views(selftest, dtype):
    base = torch.randn(8, 3, 1000, device="cuda").to(dtype)
    for view in (base[..., :640], base[..., 1:641], base[:, 1], base[::2, 1]):
        out = poisoned((view.numel() // view.shape[-1],), dtype=torch.float32)
        selftest.row_sum(out, view)
        want = view.double().sum(-1).flatten().float()
        torch.testing.assert_close(out, want, rtol=1e-4, atol=5e-2)
    with pytest.raises(ValueError, match="uniformly strided rows"):
        selftest.row_sum(torch.empty(12, device="cuda"), base[::2])  # steps 6000, then 1000


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [0, 1, 7, 8, 1000, (1 << 20) + 8])
def test_scale(selftest, dtype, n):
    x = torch.randn(n, device="cuda").to(dtype)
    out = poison_(torch.empty_like(x))
    selftest.scale(out, x, 0.5)
    torch.testing.assert_close(out, (x.float() * 0.5).to(dtype), rtol=0, atol=0)


def _healthy(selftest):
    x = torch.randn(4, 64, device="cuda")
    out = poisoned((4,), dtype=torch.float32)
    selftest.row_sum(out, x)
    torch.cuda.synchronize()
    torch.testing.assert_close(out, x.sum(1), rtol=1e-4, atol=1e-4)


def test_refusals_raise_and_leave_the_context_healthy(selftest):
    x = torch.randn(4, 64, device="cuda")
    out = torch.empty(4, device="cuda")
    with pytest.raises(ValueError, match="CUDA tensor"):
        selftest.row_sum(out.cpu(), x)
    with pytest.raises(ValueError, match="x is on device"):
        selftest.row_sum(out, x.cpu())
    with pytest.raises(TypeError, match="out has dtype float16"):
        selftest.row_sum(out.half(), x)
    with pytest.raises(TypeError, match="x has dtype float64"):
        selftest.row_sum(out, x.double())
    with pytest.raises(ValueError, match="one element per row"):
        selftest.row_sum(torch.empty(5, device="cuda"), x)
    with pytest.raises(ValueError, match="shares storage"):
        selftest.row_sum(x.view(-1)[:4], x)  # out aliases x's first row
    with pytest.raises(ValueError, match=r"\.contiguous\(\)"):
        selftest.row_sum(out, torch.randn(64, 4, device="cuda").t())
    with pytest.raises(ValueError, match="16-byte aligned"):
        y = torch.randn(1001, device="cuda")
        selftest.scale(torch.empty(1000, device="cuda"), y[1:], 2.0)
    _healthy(selftest)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_cuda_graph_capture_on_a_side_stream(selftest, dtype):
    x = torch.randn(64, 1280, device="cuda").to(dtype)
    sums = poisoned((64,), dtype=torch.float32)
    scaled = torch.empty_like(x)
    graph = torch.cuda.CUDAGraph()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side), torch.cuda.graph(graph, stream=side):
        selftest.scale(scaled, x, 2.0)
        selftest.row_sum(sums, scaled)
    torch.cuda.current_stream().wait_stream(side)
    for _ in range(3):
        x.copy_(torch.randn_like(x))
        poison_(sums)
        graph.replay()
        torch.cuda.synchronize()
        torch.testing.assert_close(sums, (x.double() * 2).sum(1).float(), rtol=1e-3, atol=1e-1)


def test_launches_follow_the_callers_stream(selftest):
    """A launch must queue behind work on torch's current stream (not the legacy stream)."""
    side = torch.cuda.Stream()
    x = torch.zeros(1 << 22, device="cuda")
    out = torch.empty_like(x)
    with torch.cuda.stream(side):
        torch.cuda._sleep(20_000_000)  # keep the side stream busy
        x.fill_(3.0)
        selftest.scale(out, x, 2.0)
    side.synchronize()
    assert torch.all(out == 6.0)
