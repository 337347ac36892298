"""`bmm` on the GPU against an fp32 reference. The general lane: the alignments the launcher
picks (loads 8, 4, 2 on tensor cores or 1 on SIMT; stores 8 to 1), its 64 x 64 and 128 x 128
tiles, the small-K kernel (K <= 8), the small-N kernel (N <= 16, N <= 32 at 2-element loads,
N <= 64 at 1: K below, at and past its chunks, forced against the CUTLASS kernel), B contiguous
along N or along K, broadcast batches, two batch dims that do not fold into one stride (either
one outer), padded rows, more problems (and small-K rows) than a grid dimension holds, ``out=``.
The tuned lane (sm90): each tile of the ladder, both B layouts, odd M, one and many problems,
the cases that must stay on the general lane. Refusals of a direct module call; CUDA-graph
capture of both lanes and the small-N kernel."""

from __future__ import annotations

import math

import pytest
import torch

import oasr_gemm
from oasr_gemm import _jit
from oasr_gemm._checks import DTYPE_TAGS
from oasr_gemm.batched import batch_views
from oasr_jit.testing import skip_unless_gpu

pytestmark = skip_unless_gpu()

DTYPES = [torch.float16, torch.bfloat16]


def _randn(*shape, dtype, seed=0, scale=1.0):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    return (torch.randn(*shape, device="cuda", generator=gen) * scale).to(dtype)


def _check(A, B, dtype, **kw):
    want = torch.matmul(A.float(), B.float())
    out = torch.full(want.shape, float("nan"), device="cuda", dtype=dtype)
    got = oasr_gemm.bmm(A, B, out=out, **kw)
    assert got is out
    tol = 1e-2 if dtype == torch.float16 else 4e-2
    torch.testing.assert_close(out.float(), want, rtol=tol, atol=tol)
    fresh = oasr_gemm.bmm(A, B, **kw)
    assert fresh.shape == want.shape and torch.equal(fresh, out)


# (L, M, K, N): the kernel and (load, store) alignments the launcher picks, for B along K / N
SHAPES = [
    (4, 64, 32, 256),  # (8, 8) both: the tuned lane
    (6, 250, 32, 20),  # (8, 4) / (4, 4)
    (6, 30, 250, 40),  # (2, 8) / (2, 8): K 250
    (8, 250, 32, 499),  # (8, 1) / SIMT: the odd position extent 2T - 1
    (5, 33, 9, 70),  # SIMT
    (3, 40, 10, 24),  # (2, 8) / (2, 8): the smallest K on tensor cores
    (6, 250, 32, 12),  # small-N: N 12 (Zipformer value head)
    (6, 30, 250, 12),  # small-N: K 250 (attention weights · values)
    (5, 33, 9, 5),  # small-N: odd everything
    (8, 250, 4, 250),  # small-K kernel: K 4 (Zipformer position head)
    (5, 33, 7, 5),  # small-K: odd everything
    (2, 300, 1, 131),  # small-K: K 1, N past one CTA's 128 columns
    (3, 1, 8, 8),  # small-K: M 1, K at its limit (8)
]


def _operands(L, M, K, N, b_layout, dtype):
    """A [L, M, K] and B [L, K, N]: contiguous ("b_row"), or a transposed view of [L, N, K],
    contiguous along K ("b_col")."""
    A = _randn(L, M, K, dtype=dtype)
    if b_layout == "b_row":
        return A, _randn(L, K, N, dtype=dtype, seed=1, scale=K**-0.5)
    return A, _randn(L, N, K, dtype=dtype, seed=1, scale=K**-0.5).transpose(-1, -2)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("b_layout", ["b_row", "b_col"])
def test_shapes_and_layouts(shape, b_layout, dtype):
    L, M, K, N = shape
    A, B = _operands(L, M, K, N, b_layout, dtype)
    _check(A, B, dtype)


# (L, M, K, N): the general lane's two tensor-op tiles for B along K (q · kT), 8-element loads.
# 128 x 128 where it pads M and N no more than 64 x 64 and its grid has a CTA per SM
WIDE_TILE = [
    (64, 250, 32, 250),  # Zipformer q · kT at T 250: 256 wide CTAs
    (64, 249, 64, 249),  # odd T: 1-element stores
    (40, 255, 40, 383),  # ragged tiles in M, N and K
    (8, 250, 32, 250),  # 32 wide CTAs: fewer than the SMs
    (64, 130, 32, 250),  # M 130: two 128-row tiles pad more than three of 64
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", WIDE_TILE, ids=str)
def test_general_lane_tiles(shape, dtype):
    L, M, K, N = shape
    A, B = _operands(L, M, K, N, "b_col", dtype)
    sms = torch.cuda.get_device_properties(A.device).multi_processor_count
    pads_alike = all(math.ceil(x / 64) % 2 == 0 for x in (M, N))
    wide = pads_alike and L * math.ceil(M / 128) * math.ceil(N / 128) >= sms
    store = 2 if N % 2 == 0 else 1
    assert oasr_gemm.selection.bmm_lane(A, B) == f"sm80 8/{store}" + (" 128x128" if wide else "")
    _check(A, B, dtype)
    # B along N keeps the 64 x 64 tile
    A, B = _operands(L, M, K, N, "b_row", dtype)
    assert not oasr_gemm.selection.bmm_lane(A, B).endswith("128x128")


@pytest.mark.parametrize("dtype", DTYPES)
def test_broadcast_batches(dtype):
    A = _randn(2, 3, 50, 32, dtype=dtype)
    _check(A, _randn(3, 32, 40, dtype=dtype, seed=1, scale=0.2), dtype)  # B over dim 0
    _check(A, _randn(32, 40, dtype=dtype, seed=2, scale=0.2), dtype)  # B over both
    _check(_randn(50, 32, dtype=dtype), _randn(4, 32, 40, dtype=dtype, seed=3), dtype)  # A
    _check(_randn(2, 1, 50, 32, dtype=dtype), _randn(1, 3, 32, 40, dtype=dtype, seed=4), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("K", [36, 5], ids=["cutlass", "small_k"])
@pytest.mark.parametrize("dims", [(3, 2), (2, 3)], ids=["outer_dim0", "outer_dim1"])
def test_batch_dims_that_do_not_fold_and_padded_rows(dims, K, dtype):
    base = _randn(*dims, 50, 40, dtype=dtype)
    A = base.permute(1, 0, 2, 3)[..., :K]  # head-major: no single batch stride; padded rows
    B = _randn(*reversed(dims), K, 24, dtype=dtype, seed=1, scale=K**-0.5)
    _check(A, B, dtype)


@pytest.mark.parametrize("K", [8, 16], ids=["small_k", "small_n"])
def test_more_problems_than_the_grid_z_dimension(K):
    dtype = torch.float16
    A = _randn(70000, 2, K, dtype=dtype)
    B = _randn(70000, K, 6, dtype=dtype, seed=1)  # N 6: the general lane (the tuned one below)
    assert oasr_gemm.selection.bmm_lane(A, B) == ("small_k" if K == 8 else "small_n")
    _check(A, B, dtype)


# (L, M, K, N) -> the tuned tile the ladder picks on 132 SMs: the largest whose grid fills them,
# among those no larger than the problem (rounded up to 64)
TUNED = [
    ((16, 1024, 64, 1024), "t128x128x64_c1x1_pp"),  # 1024 tiles
    ((64, 250, 64, 256), "t128x128x64_c1x1_pp"),  # odd M: 256 tiles
    ((1, 8000, 512, 256), "t128x64x64_c1x1_pp"),  # one problem: 126 tiles of 128 x 128
    ((4, 512, 128, 256), "t128x64x64_c1x1_pp"),  # no tile fills 132 SMs: the smallest
    ((8, 256, 256, 64), "t128x64x64_c1x1_pp"),  # attention weights · values, head dim 64
    ((70000, 2, 16, 8), "t128x64x64_c1x1_pp"),  # tiny problems, more than a grid dimension
]


def _expected_tile(L, M, N, sms):
    """configs.BMM_TUNED's ladder, as bmm_launcher.h's pick_tuned."""
    from oasr_gemm.configs import BMM_TUNED

    for config in BMM_TUNED:
        if config.tile_m > -(-M // 64) * 64 or config.tile_n > -(-N // 64) * 64:
            continue
        if -(-M // config.tile_m) * -(-N // config.tile_n) * L >= sms:
            return config.id
    return BMM_TUNED[-1].id


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [s for s, _ in TUNED], ids=str)
@pytest.mark.parametrize("b_layout", ["b_row", "b_col"])
def test_tuned_lane(shape, b_layout, dtype):
    L, M, K, N = shape
    A, B = _operands(L, M, K, N, b_layout, dtype)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    assert oasr_gemm.selection.bmm_lane(A, B) == f"sm90 {_expected_tile(L, M, N, sms)}"
    _check(A, B, dtype)


def test_tuned_lane_tile_ladder_on_the_h200():
    if torch.cuda.get_device_properties(0).multi_processor_count != 132:
        pytest.skip("the expected tiles are for 132 SMs")
    for (L, M, K, N), tile in TUNED:
        assert _expected_tile(L, M, N, 132) == tile, (L, M, K, N)
        A = _randn(L, M, K, dtype=torch.float16)
        B = _randn(L, K, N, dtype=torch.float16, seed=1)
        assert oasr_gemm.selection.bmm_lane(A, B) == f"sm90 {tile}", (L, M, K, N)


@pytest.mark.parametrize(
    "case",
    ["broadcast_b", "unaligned_pointer", "two_batch_dims_not_folding", "n_not_multiple_of_8"],
)
def test_what_stays_on_the_general_lane(case):
    dtype = torch.bfloat16
    A, B = _randn(4, 128, 64, dtype=dtype), _randn(4, 64, 128, dtype=dtype, seed=1, scale=0.1)
    if case == "broadcast_b":
        B = B[:1].expand(4, 64, 128)
    elif case == "unaligned_pointer":
        A = _randn(4 * 128 * 64 + 8, dtype=dtype)[8:].view(4, 128, 64)  # 16-byte aligned: tuned
        assert oasr_gemm.selection.bmm_lane(A, B).startswith("sm90")
        A = _randn(4 * 128 * 64 + 4, dtype=dtype)[4:].view(4, 128, 64)  # 8 bytes: general
    elif case == "two_batch_dims_not_folding":
        A = _randn(4, 2, 128, 64, dtype=dtype).transpose(0, 1)
        B = _randn(2, 4, 64, 128, dtype=dtype, seed=1, scale=0.1)
    else:
        B = B[..., :124]
    assert oasr_gemm.selection.bmm_lane(A, B).startswith(("sm80", "simt")), case
    _check(A, B, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_small_k_position_head_with_broadcast_b(dtype):
    """Zipformer's q · pos: B [heads, 4, 2T - 1] broadcast over the batch, N odd."""
    A = _randn(3, 4, 250, 4, dtype=dtype)
    _check(A, _randn(4, 4, 499, dtype=dtype, seed=1, scale=0.5), dtype)
    # B contiguous along K, padded rows in A
    A = _randn(3, 4, 250, 8, dtype=dtype)[..., :5]
    _check(A, _randn(4, 499, 5, dtype=dtype, seed=2, scale=0.5).transpose(-1, -2), dtype)


def test_small_k_more_rows_than_the_grid_y_dimension():
    dtype = torch.bfloat16
    A = _randn(1, 65535 * 16 + 37, 3, dtype=dtype)
    _check(A, _randn(1, 3, 5, dtype=dtype, seed=1), dtype)


def _forced(A, B, choice):
    """bmm through the module's ``_with`` export: -2 the CUTLASS general lane, -3 small-N."""
    dtype = A.dtype
    _, a4, b4, b_layout = batch_views(A, B)
    fn = getattr(_jit.bmm_module(), _jit.bmm_function_name(DTYPE_TAGS[dtype], b_layout) + "_with")
    out = torch.full((*a4.shape[:3], b4.shape[-1]), float("nan"), device="cuda", dtype=dtype)
    fn(out, a4, b4, choice)
    return out


# (L, M, K, N): K below and past one chunk and across several with a ragged last one; odd K or
# N (2-byte loads) and even ones (4-byte loads); one or two 8-column MMA tiles; the 32-column CTA
# (N 17-32), which the launcher runs where the loads would be 1 or 2 elements (the CUTLASS kernel
# at 4 and 8: SHAPES' N 20)
SMALL_N = [
    (3, 33, 9, 1),
    (2, 64, 63, 16),
    (2, 65, 64, 7),
    (4, 31, 129, 12),
    (2, 250, 250, 12),
    (2, 40, 130, 10),
    (1, 70, 300, 8),
    (2, 33, 71, 17),
    (2, 249, 249, 32),
    (1, 31, 9, 31),
    (2, 250, 250, 32),
    (3, 40, 130, 24),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SMALL_N, ids=str)
@pytest.mark.parametrize("b_layout", ["b_row", "b_col"])
def test_small_n_against_the_reference_and_the_cutlass_kernel(shape, b_layout, dtype):
    L, M, K, N = shape
    A, B = _operands(L, M, K, N, b_layout, dtype)
    assert oasr_gemm.selection.bmm_lane(A, B) == "small_n"
    _check(A, B, dtype)
    want = torch.matmul(A.float(), B.float())
    for choice in (-3, -2):  # small-N, then the CUTLASS kernel the call used to run
        torch.testing.assert_close(_forced(A, B, choice)[0].float(), want, rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("dtype", DTYPES)
def test_small_n_attention_values_with_broadcast_and_padded_rows(dtype):
    """Zipformer's weights · values as views: A head-major (the batch dims do not fold) with
    padded rows, B broadcast over the batch."""
    A = _randn(4, 3, 250, 256, dtype=dtype).transpose(0, 1)[..., :250]
    B = _randn(4, 250, 12, dtype=dtype, seed=1, scale=250**-0.5)
    assert oasr_gemm.selection.bmm_lane(A, B) == "small_n"
    _check(A, B, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_small_n_with_an_odd_start(dtype):
    """Even K and N, but A one element into its storage: the 2-byte loads."""
    A = _randn(3 * 40 * 64 + 1, dtype=dtype)[1:].view(3, 40, 64)
    B = _randn(3, 64, 12, dtype=dtype, seed=1, scale=0.125)
    assert oasr_gemm.selection.bmm_lane(A, B) == "small_n"
    _check(A, B, dtype)


def test_small_n_boundaries():
    """What stays on CUTLASS: N 17-32 with 4-element loads, N 33-64 with 2-element loads, N 65
    with 1-element loads (SIMT). N 33-64 with 1-element loads runs the small-N kernel."""
    dtype = torch.float16
    A, B = _randn(2, 50, 32, dtype=dtype), _randn(2, 32, 20, dtype=dtype, seed=1, scale=0.2)
    assert oasr_gemm.selection.bmm_lane(A, B) == "sm80 4/4"
    A, B = _randn(2, 50, 34, dtype=dtype), _randn(2, 34, 40, dtype=dtype, seed=1, scale=0.2)
    assert oasr_gemm.selection.bmm_lane(A, B) == "sm80 2/8"
    A, B = _randn(2, 50, 33, dtype=dtype), _randn(2, 33, 65, dtype=dtype, seed=1, scale=0.2)
    assert oasr_gemm.selection.bmm_lane(A, B) == "simt"
    _check(A, B, dtype)
    A, B = _randn(2, 50, 33, dtype=dtype), _randn(2, 33, 64, dtype=dtype, seed=1, scale=0.2)
    assert oasr_gemm.selection.bmm_lane(A, B) == "small_n"
    _check(A, B, dtype)


# (L, M, K, N) for the 64-column CTA (64 rows), forced (the launcher runs it at odd K)
SMALL_N_64 = [(2, 65, 33, 33), (2, 249, 249, 64), (3, 40, 130, 48), (1, 130, 9, 63)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SMALL_N_64, ids=str)
@pytest.mark.parametrize("b_layout", ["b_row", "b_col"])
def test_small_n_64_columns_forced(shape, b_layout, dtype):
    L, M, K, N = shape
    A, B = _operands(L, M, K, N, b_layout, dtype)
    want = torch.matmul(A.float(), B.float())
    tol = 1e-2 if dtype == torch.float16 else 4e-2
    torch.testing.assert_close(_forced(A, B, -3)[0].float(), want, rtol=tol, atol=tol)


def test_small_n_refuses_a_wide_n_when_forced():
    A, B = _randn(2, 40, 32, dtype=torch.float16), _randn(2, 32, 65, dtype=torch.float16)
    with pytest.raises(ValueError, match="N <= 64"):
        _forced(A, B, -3)
    torch.cuda.synchronize()


def test_empty_and_zero_k():
    dtype = torch.bfloat16
    assert oasr_gemm.bmm(_randn(0, 5, 8, dtype=dtype), _randn(0, 8, 8, dtype=dtype)).shape == (
        0,
        5,
        8,
    )
    out = oasr_gemm.bmm(_randn(2, 5, 0, dtype=dtype), _randn(2, 0, 8, dtype=dtype))
    assert torch.equal(out, torch.zeros(2, 5, 8, device="cuda", dtype=dtype))


def test_direct_module_call_refusals():
    dtype = torch.float16
    fn = getattr(_jit.bmm_module(), _jit.bmm_function_name("fp16", "b_row"))
    A, B = _randn(1, 2, 5, 8, dtype=dtype), _randn(1, 2, 8, 8, dtype=dtype)
    with pytest.raises(ValueError):
        fn(torch.empty(2, 5, 8, device="cuda", dtype=dtype), A, B)  # out not 4-D
    with pytest.raises(ValueError, match="unit stride along N"):
        fn(torch.empty(1, 2, 5, 8, device="cuda", dtype=dtype), A, B.transpose(-1, -2))
    with pytest.raises(ValueError, match="shares storage"):
        fn(A, A, B)
    torch.cuda.synchronize()


@pytest.mark.parametrize("N", [250, 256, 12], ids=["general", "tuned", "small_n"])
def test_graph_capture(N):
    dtype = torch.float16
    A = _randn(8, 250, 32, dtype=dtype)
    B = _randn(8, N, 32, dtype=dtype, seed=1, scale=0.2).transpose(-1, -2)
    lane = {250: "sm80", 256: "sm90", 12: "small_n"}[N]
    assert oasr_gemm.selection.bmm_lane(A, B).startswith(lane)
    out = torch.empty(8, 250, N, device="cuda", dtype=dtype)
    oasr_gemm.bmm(A, B, out=out)  # builds and loads the module outside the capture
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=side):
        oasr_gemm.bmm(A, B, out=out)
    out.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(out.float(), A.float() @ B.float(), rtol=1e-2, atol=1e-2)
