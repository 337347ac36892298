"""GPU tests of softmax, log_softmax and masked_softmax against their PyTorch twins: every op x
dtype x width x rows (each register shape, and the two-pass kernel past 16384 columns), strided
inputs, ``out=`` and in place, extremes; masked_softmax with broadcast biases, as_strided and
rel_shift relative-position windows, [..., ::ds] mask slices, key padding and fully masked rows;
outputs poisoned first; launcher-level refusals; CUDA-graph capture of each op."""

from __future__ import annotations

import pytest
import torch
from norm_act_softmax_helpers import DTYPES, assert_close

import oasr_norm
from oasr_jit.testing import poison_, skip_unless_gpu
from oasr_norm import _jit, twins

pytestmark = skip_unless_gpu()

NEG_INF = float("-inf")
# Widths: 1; 7, 1025 and 8195 (odd: the scalar kernels); 6, 500 and 1500 (2- and 4-element
# vectors: attention rows of T 500 and 1500); 66, 131, 249 and 250 (16-bit rows of 65..256 that
# 8-byte vectors do not fit: an aligned body of 16-byte vectors with its head and tail;
# attention rows of T 249 and 250); 64/80 (a group of 8/16 lanes per row); ASR widths 192..1280
# and 1000 (a warp per row, 1..4 vectors a lane), 4096 and 8192 (a block per row). Rows: 1, 3,
# 1000 (several rows per block, a partial last block).
WIDTHS = [1, 6, 7, 64, 66, 80, 131, 192, 249, 250, 256, 384, 500, 512, 1000, 1025, 1280, 1500]
WIDTHS += [4096, 8192, 8195]
ROWS = [1, 3, 1000]
# At the register capacity (16384 = 512 threads x 32 values), then past it: the two-pass
# online kernel; 51865 is Whisper's vocabulary.
LONG_WIDTHS = [16384, 16385, 20000, 51865]


def _randn(*shape, dtype, scale=3.0, device="cuda"):
    return (torch.randn(shape, device=device) * scale).to(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("cols", WIDTHS)
@pytest.mark.parametrize("rows", ROWS)
@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_matches_twin(op, rows, cols, dtype):
    x = _randn(rows, cols, dtype=dtype)
    want = getattr(twins, op)(x)
    out = poison_(torch.empty_like(x))
    assert getattr(oasr_norm, op)(x, out=out) is out
    assert_close(out, want)
    assert_close(getattr(oasr_norm, op)(x, dim=1), want)
    if op == "softmax":
        sums = out.double().sum(-1)
        torch.testing.assert_close(sums, torch.ones_like(sums), rtol=0, atol=1e-2)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("cols", LONG_WIDTHS)
@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_long_rows(op, cols, dtype):
    x = _randn(3, cols, dtype=dtype)
    out = poison_(torch.empty_like(x))
    getattr(oasr_norm, op)(x, out=out)
    assert_close(out, getattr(twins, op)(x))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_strided_nd_and_in_place(op, dtype):
    fn, twin = getattr(oasr_norm, op), getattr(twins, op)
    wide = _randn(4, 50, 3 * 256 + 8, dtype=dtype)
    views = {
        "channel_slice": wide[..., :256],
        "unaligned_start": wide[..., 1:257],
        "start_off_by_2": wide[..., 2:258],  # 2-element vectors
        "start_off_by_4": wide[..., 4:260],  # 4-element vectors (halves), 16 bytes (float)
        "row_slice": wide[:, ::2, :256],
        "ctc_btv": _randn(2, 125, 5000, dtype=dtype),  # [B, T, V]
        "empty": _randn(3, 0, 7, dtype=dtype),
    }
    for name, x in views.items():
        out = poison_(torch.empty(x.shape, device="cuda", dtype=dtype))
        assert fn(x, out=out) is out
        assert_close(out, twin(x), msg=lambda m, name=name: f"{name}: {m}")
    x = _randn(33, 1280, dtype=dtype)
    want = twin(x)
    assert fn(x, out=x) is x
    assert_close(x, want)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_rows_off_16_bytes(op, dtype):
    """Contiguous x and out that start at every element offset, alike or not, and in place: the
    vectors narrow to what every row's alignment allows."""
    fn, twin = getattr(oasr_norm, op), getattr(twins, op)
    for cols in (131, 250, 1000):
        rows = 37
        flat = _randn(rows * cols + 16, dtype=dtype)
        for offset in range(8):
            x = flat[offset : offset + rows * cols].view(rows, cols)
            want = twin(x)
            for out_offset in (offset, (offset + 1) % 8):
                room = poison_(torch.empty(rows * cols + 16, device="cuda", dtype=dtype))
                out = room[out_offset : out_offset + rows * cols].view(rows, cols)
                assert fn(x, out=out) is out
                assert_close(out, want, msg=lambda m, c=cols, o=offset: f"{c} cols at {o}: {m}")
            in_place = flat.clone()[offset : offset + rows * cols].view(rows, cols)
            assert fn(in_place, out=in_place) is in_place
            assert_close(in_place, want)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_strided_rows_at_the_outputs_offset(op, dtype):
    """Rows of 250 whose stride (258) differs from the width by whole 16 bytes, starting 3
    elements in, into an output at the same offset: each row is read as an aligned body (6
    bytes of head) where the halves allow it."""
    fn, twin = getattr(oasr_norm, op), getattr(twins, op)
    x = _randn(37, 258, dtype=dtype)[:, 3:253]
    room = poison_(torch.empty(37 * 250 + 8, device="cuda", dtype=dtype))
    out = room[3 : 3 + 37 * 250].view(37, 250)
    assert fn(x, out=out) is out
    assert_close(out, twin(x))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("cols", [5, 250, 256, 8195, 20000])
def test_extremes_follow_torch(cols, dtype):
    x = _randn(4, cols, dtype=dtype)
    x[0, ::3] = NEG_INF  # masked entries: probability 0
    x[1] = NEG_INF  # a row of -inf: NaN, as torch
    x[2, 0], x[2, 1:] = 1e4, -1e4  # one dominant entry
    for op in ("softmax", "log_softmax"):
        out = poison_(torch.empty_like(x))
        getattr(oasr_norm, op)(x, out=out)
        assert_close(out, getattr(twins, op)(x), equal_nan=True)
        assert torch.isnan(out[1]).all()
    probs = oasr_norm.softmax(x)
    assert (probs[0, ::3] == 0).all() and probs[2, 0] == 1


# ---------------------------------------------------------------------------------------------
# masked_softmax


def _rel_pos_window(batch, heads, q_len, k_len, dtype):
    """bias[b, h, i, j] = P[h, i + j]: an as_strided window over a [H, Tq + Tk - 1] table."""
    table = _randn(heads, q_len + k_len - 1, dtype=dtype)
    return table.as_strided((batch, heads, q_len, k_len), (0, table.stride(0), 1, 1))


def _rel_shift_view(pos_scores):
    """ESPnet's rel_shift of (q + v) P^T [B, H, T, 2T - 1] to [B, H, T, T]: the padded buffer is
    built as there, the result is a view into it (row stride 2T - 1), consumed without a copy."""
    b, h, t1, t2 = pos_scores.shape
    padded = torch.cat([pos_scores.new_zeros(b, h, t1, 1), pos_scores], dim=-1)
    padded = padded.view(b, h, t2 + 1, t1)
    return padded[:, :, 1:].view(b, h, t1, t2)[..., : t2 // 2 + 1]


CASES = {
    "plain": dict(),
    "bias_broadcast_heads": dict(bias="hqk"),
    "bias_rel_pos_window": dict(bias="window"),
    "bias_strided_slice": dict(bias="slice"),
    "mask_slice": dict(mask="slice2"),
    "mask_slice3_broadcast_heads": dict(mask="slice3"),
    "key_padding": dict(kpm=True),
    "all": dict(bias="window", mask="slice2", kpm=True),
    # unit steps over Tk: two values a load (MaskedPairRow), whole words at even Tk
    "mask_dense": dict(mask="dense"),
    "all_dense": dict(bias="hqk", mask="dense", kpm=True),
}


def _case(kind, batch, heads, q_len, k_len, dtype, bias_dtype=None):
    bias_dtype = bias_dtype or dtype
    scores = _randn(batch, heads, q_len, k_len, dtype=dtype)
    bias = mask = kpm = None
    if kind.get("bias") == "hqk":
        bias = _randn(heads, q_len, k_len, dtype=bias_dtype)
    elif kind.get("bias") == "window":
        bias = _rel_pos_window(batch, heads, q_len, k_len, bias_dtype)
    elif kind.get("bias") == "slice":
        bias = _randn(batch, 1, 1, 2 * k_len, dtype=bias_dtype)[..., ::2]
    if kind.get("mask") in ("slice2", "slice3"):
        ds = 2 if kind["mask"] == "slice2" else 3
        mask = torch.rand(batch, 1, q_len, ds * k_len, device="cuda") > 0.3
        mask = mask[..., ::ds]
    elif kind.get("mask") == "dense":
        mask = torch.rand(batch, 1, q_len, k_len, device="cuda") > 0.3
    if mask is not None:
        mask[0, 0, 0] = False  # a fully masked row: zeros
    if kind.get("kpm"):
        kpm = torch.zeros(batch, k_len, dtype=torch.bool, device="cuda")
        for b in range(batch):
            kpm[b, k_len - b :] = True  # entry b pads its last b keys
        kpm[-1] = True  # the last entry is all padding: zeros
    return scores, bias, mask, kpm


# Tk: 1; every register shape of the one-value row (the sliced operands: groups of 4/8/16 lanes,
# a warp with 1..32 values a lane, blocks of 128..512) and of the pair rows (unit steps: whole
# words at even Tk 2, 10, 18, 34, 66 .. 4098, element by element at odd Tk); ASR key lengths
# 125/250/500/750/1500 (rows off 16 bytes); past 16384 (the two-pass kernel).
K_LENS = [1, 2, 3, 5, 9, 10, 17, 18, 33, 34, 65, 66, 125, 129, 250, 257, 500, 513, 750, 1025]
K_LENS += [1026, 1500, 4097, 4098, 8195, 16999, 17000]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("k_len", K_LENS)
@pytest.mark.parametrize("kind", list(CASES))
def test_masked_matches_twin(kind, k_len, dtype):
    q_len = 7 if k_len <= 1500 else 2
    scores, bias, mask, kpm = _case(CASES[kind], 3, 2, q_len, k_len, dtype)
    out = poison_(torch.empty_like(scores))
    got = oasr_norm.masked_softmax(scores, bias, mask, kpm, scale=0.125, out=out)
    assert got is out
    want = twins.masked_softmax(scores, bias, mask, kpm, scale=0.125)
    assert_close(out, want)
    assert not torch.isnan(out).any()
    if mask is not None:
        assert (out[0, :, 0] == 0).all(), "a fully masked row must be zeros"
    if kpm is not None:
        assert (out[-1] == 0).all(), "an all-padding entry must be zeros"


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("t", [125, 250])  # odd and even Tk
def test_masked_float32_bias_and_rel_shift_view(t, dtype):
    batch, heads = 2, 4
    scores, bias, mask, kpm = _case(CASES["all"], batch, heads, t, t, dtype, torch.float32)
    out = oasr_norm.masked_softmax(scores, bias, mask, kpm, scale=0.125)
    assert_close(out, twins.masked_softmax(scores, bias, mask, kpm, scale=0.125))
    rel = _rel_shift_view(_randn(batch, heads, t, 2 * t - 1, dtype=dtype))
    assert rel.stride(-2) == 2 * t - 1 and not rel.is_contiguous()
    out = oasr_norm.masked_softmax(scores, rel, key_padding_mask=kpm)
    assert_close(out, twins.masked_softmax(scores, rel, key_padding_mask=kpm))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("t", [250, 249])
def test_masked_pair_layouts(t, dtype):
    """Unit steps over Tk: two values a load. Whole words where Tk is even and scores, out and
    the masks start their rows on a pair (the bias anywhere); one of them an element off, an odd
    row stride or an odd Tk (rows ending on half a pair), element by element. Same answers."""
    batch, heads = 3, 2
    scores, bias, mask, kpm = _case(CASES["all_dense"], batch, heads, t, t, dtype)
    f32_bias = _randn(heads, t, t, dtype=torch.float32)

    def check(scores, bias, mask, kpm, out=None):
        out = poison_(torch.empty_like(scores)) if out is None else poison_(out)
        oasr_norm.masked_softmax(scores, bias, mask, kpm, scale=0.125, out=out)
        assert_close(out, twins.masked_softmax(scores, bias, mask, kpm, scale=0.125))
        assert (out[0, :, 0] == 0).all() and (out[-1] == 0).all()

    def shifted(x):  # x's values one element into a buffer: rows start off a pair
        buf = torch.empty(x.numel() + 1, dtype=x.dtype, device="cuda")
        view = buf[1:].view(x.shape)
        view.copy_(x)
        return view

    check(scores, bias, mask, kpm)  # pairs, all three operands
    check(scores, f32_bias, mask, kpm)  # pairs, a float32 bias
    check(scores, shifted(bias), mask, kpm)  # pairs: the bias is read by element
    check(scores, shifted(f32_bias), mask, kpm)
    check(scores, _rel_pos_window(batch, heads, t, t, dtype), mask, kpm)  # pairs
    check(shifted(scores), bias, mask, kpm)
    check(scores, bias, shifted(mask), kpm)
    check(scores, bias, mask, shifted(kpm))
    out = torch.empty(scores.numel() + 1, dtype=dtype, device="cuda")[1:].view(scores.shape)
    check(scores, bias, mask, kpm, out=out)
    # odd row strides (a [..., :Tk] slice of a wider buffer): the bias's (pairs), the mask's
    wide_bias = _randn(heads, t, t + 1, dtype=dtype)[..., :t]
    check(scores, wide_bias, mask, kpm)
    wide_mask = torch.rand(batch, 1, t, t + 1, device="cuda")[..., :t] > 0.3
    wide_mask[0, 0, 0] = False
    check(scores, bias, wide_mask, kpm)
    # in place over the pair row
    s = scores.clone()
    want = twins.masked_softmax(s, bias, mask, kpm, scale=0.125)
    assert oasr_norm.masked_softmax(s, bias, mask, kpm, scale=0.125, out=s) is s
    assert_close(s, want)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("t", [65, 66, 129, 250, 255, 256])
def test_masked_aligned_body_layouts(t, dtype):
    """No general mask, 65..256 keys of 16 bits: the aligned-body kernel (16-byte vectors of the
    scores and out; the bias as vectors where its rows sit at the scores' offset mod 16 bytes,
    else by element), where scores and out rows are at the same offset; else the pair rows.
    Every layout gives the twin's answer, an all-padding entry zeros."""
    batch, heads = 3, 2
    scores = _randn(batch, heads, t, t, dtype=dtype)
    kpm = torch.rand(batch, t, device="cuda") > 0.7
    kpm[-1] = True

    def check(scores, bias, kpm, out=None):
        out = poison_(torch.empty_like(scores)) if out is None else poison_(out)
        oasr_norm.masked_softmax(scores, bias, key_padding_mask=kpm, scale=0.125, out=out)
        assert_close(out, twins.masked_softmax(scores, bias, key_padding_mask=kpm, scale=0.125))
        assert not torch.isnan(out).any()
        if kpm is not None:
            assert (out[-1] == 0).all(), "an all-padding entry must be zeros"

    def shifted(x, by=1):  # x's values `by` elements into a buffer
        buf = torch.empty(x.numel() + by, dtype=x.dtype, device="cuda")
        view = buf[by:].view(x.shape)
        view.copy_(x)
        return view

    dense = _randn(batch, heads, t, t, dtype=dtype)  # at the scores' offsets: vectors
    for bias in (None, dense, shifted(dense), shifted(dense, 8), _randn(heads, t, t, dtype=dtype)):
        check(scores, bias, kpm)
        check(scores, bias, None)
    check(scores, _rel_pos_window(batch, heads, t, t, dtype), kpm)  # by element
    check(scores, dense, shifted(kpm))
    # scores and out one element (pair rows) or three elements (aligned body) off together
    for by in (1, 3):
        out = torch.empty(scores.numel() + by, dtype=dtype, device="cuda")[by:].view(scores.shape)
        check(shifted(scores, by), shifted(dense, by), kpm, out=out)
    check(shifted(scores), dense, kpm)  # scores and out at different offsets: pair rows
    # a [..., :Tk] slice of a wider buffer: rows off by 8 elements are still vectors
    wide = _randn(batch, heads, t, t + 8, dtype=dtype)[..., :t]
    check(wide, dense, kpm)
    # in place
    s = scores.clone()
    want = twins.masked_softmax(s, dense, key_padding_mask=kpm, scale=0.125)
    assert oasr_norm.masked_softmax(s, dense, key_padding_mask=kpm, scale=0.125, out=s) is s
    assert_close(s, want)


@pytest.mark.parametrize("dtype", DTYPES)
def test_masked_scores_layouts_ranks_and_in_place(dtype):
    # scores as a permuted view of [B, Tq, H, Tk] (unit stride over Tk only)
    bthk = _randn(2, 50, 4, 250, dtype=dtype)
    scores = bthk.permute(0, 2, 1, 3)
    mask = torch.rand(50, 250, device="cuda") > 0.2  # broadcast over B and H
    out = poison_(torch.empty(scores.shape, device="cuda", dtype=dtype))
    oasr_norm.masked_softmax(scores, mask=mask, scale=0.5, out=out)
    assert_close(out, twins.masked_softmax(scores, mask=mask, scale=0.5))
    # 3-D [B, Tq, Tk] and 2-D [Tq, Tk], key padding [B, Tk] / [1, Tk]
    s3 = _randn(3, 20, 30, dtype=dtype)
    kp3 = torch.rand(3, 30, device="cuda") > 0.7
    assert_close(
        oasr_norm.masked_softmax(s3, key_padding_mask=kp3),
        twins.masked_softmax(s3, key_padding_mask=kp3),
    )
    s2, kp2 = _randn(20, 30, dtype=dtype), kp3[:1]
    bias2 = _randn(30, dtype=torch.float32)
    assert_close(
        oasr_norm.masked_softmax(s2, bias2, key_padding_mask=kp2),
        twins.masked_softmax(s2, bias2, key_padding_mask=kp2),
    )
    # in place
    s = _randn(2, 3, 40, 750, dtype=dtype)
    bias = _rel_pos_window(2, 3, 40, 750, dtype)
    want = twins.masked_softmax(s, bias)
    assert oasr_norm.masked_softmax(s, bias, out=s) is s
    assert_close(s, want)
    # empty
    e = _randn(2, 0, 5, 7, dtype=dtype)
    assert (
        oasr_norm.masked_softmax(e, mask=torch.ones(7, dtype=torch.bool, device="cuda")).shape
        == e.shape
    )


# ---------------------------------------------------------------------------------------------
# refusals and capture


def _healthy():
    x = _randn(4, 64, dtype=torch.float32)
    out = oasr_norm.softmax(x)
    torch.cuda.synchronize()
    assert_close(out, twins.softmax(x))


def test_launcher_refusals_raise_and_leave_the_context_healthy():
    mod = _jit.module("softmax")
    x = _randn(4, 64, dtype=torch.float32)
    out = torch.empty_like(x)
    with pytest.raises(ValueError, match="CUDA tensor"):
        mod.softmax(out.cpu(), x, False)
    with pytest.raises(ValueError, match="x is on device"):
        mod.softmax(out, x.cpu(), False)
    with pytest.raises(TypeError, match="same dtype"):
        mod.softmax(out.half(), x, False)
    with pytest.raises(TypeError, match="x has dtype float64"):
        mod.softmax(out.double(), x.double(), True)
    with pytest.raises(ValueError, match="same shape"):
        mod.softmax(torch.empty(4, 63, device="cuda"), x, False)
    with pytest.raises(ValueError, match="uniformly strided rows"):
        mod.softmax(
            torch.empty(4, 3, 64, device="cuda"), _randn(8, 3, 64, dtype=x.dtype)[::2], False
        )
    buf = _randn(2 * 256, dtype=x.dtype)
    with pytest.raises(ValueError, match="shares storage"):
        mod.softmax(buf[64 : 64 + 256].view(4, 64), buf[:256].view(4, 64), False)

    mod = _jit.masked_softmax_module("fp16")
    s = _randn(2, 3, 4, 5, dtype=torch.float16)
    o = torch.empty_like(s)
    with pytest.raises(ValueError, match="4-D"):
        mod.masked_softmax(o.view(6, 4, 5), s.view(6, 4, 5), None, None, None, 1.0)
    with pytest.raises(ValueError, match="unit stride"):
        mod.masked_softmax(
            o, _randn(2, 3, 5, 4, dtype=s.dtype).transpose(-1, -2), None, None, None, 1.0
        )
    with pytest.raises(ValueError, match="does not broadcast"):
        mod.masked_softmax(o, s, _randn(2, 3, 4, 6, dtype=s.dtype), None, None, 1.0)
    with pytest.raises(TypeError, match="bias"):
        mod.masked_softmax(o, s, _randn(1, 1, 4, 5, dtype=torch.float64), None, None, 1.0)
    with pytest.raises(ValueError, match="bias is on device"):
        mod.masked_softmax(o, s, _randn(1, 1, 4, 5, dtype=s.dtype, device="cpu"), None, None, 1.0)
    with pytest.raises(ValueError, match="shares storage"):
        mod.masked_softmax(o, s, o, None, None, 1.0)
    with pytest.raises(ValueError, match="shares storage"):
        shifted = _randn(121, dtype=s.dtype)  # out one element past the scores, overlapping
        mod.masked_softmax(shifted[1:].view(2, 3, 4, 5), shifted[:120].view(2, 3, 4, 5), None,
                           None, None, 1.0)  # fmt: skip
    with pytest.raises(TypeError, match="mask has dtype float32"):
        mod.masked_softmax(o, s, None, torch.ones(1, 1, 4, 5, device="cuda"), None, 1.0)
    with pytest.raises(ValueError, match="does not broadcast"):
        kpm = torch.zeros(2, 6, dtype=torch.bool, device="cuda")
        mod.masked_softmax(o, s, None, None, kpm, 1.0)
    with pytest.raises(ValueError, match="2-D"):
        kpm = torch.zeros(2, 1, 5, dtype=torch.bool, device="cuda")
        mod.masked_softmax(o, s, None, None, kpm, 1.0)
    with pytest.raises(TypeError, match="oasr_norm_masked_softmax_bf16 holds the kernels of"):
        _jit.masked_softmax_module("bf16").masked_softmax(o, s, None, None, None, 1.0)
    _healthy()


def _capture_and_replay(run, inputs, out, want):
    run()  # build and load outside the capture
    graph = torch.cuda.CUDAGraph()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side), torch.cuda.graph(graph, stream=side):
        run()
    torch.cuda.current_stream().wait_stream(side)
    for _ in range(3):
        for t in inputs:
            t.copy_(torch.randn_like(t.float()).mul_(3).to(t.dtype))
        poison_(out)
        graph.replay()
        torch.cuda.synchronize()
        assert_close(out, want())


@pytest.mark.parametrize("op", ["softmax", "log_softmax", "masked_softmax"])
def test_cuda_graph_capture_on_a_side_stream(op):
    dtype = torch.float16
    if op == "masked_softmax":
        scores, bias, mask, kpm = _case(CASES["all"], 2, 4, 50, 250, dtype)
        table = bias.as_strided((4, 50 + 250 - 1), (bias.stride(1), 1))  # the window's storage
        out = torch.empty_like(scores)

        def run():
            oasr_norm.masked_softmax(scores, bias, mask, kpm, scale=0.125, out=out)

        _capture_and_replay(
            run,
            [scores, table],
            out,
            lambda: twins.masked_softmax(scores, bias, mask, kpm, scale=0.125),
        )
    else:
        x = _randn(257, 1280, dtype=dtype)
        out = torch.empty_like(x)
        fn, twin = getattr(oasr_norm, op), getattr(twins, op)
        _capture_and_replay(lambda: fn(x, out=out), [x], out, lambda: twin(x))
