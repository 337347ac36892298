"""GPU tests of the activations and GLU against their PyTorch twins: every op x dtype x width x
rows, N-D and empty shapes, strided inputs read where they are (channel slices, padded, unaligned
and sliced rows), ``out=`` and in place, extremes, outputs poisoned first; launcher-level
refusals that leave the context healthy; CUDA-graph capture of each op."""

from __future__ import annotations

import pytest
import torch
from norm_act_softmax_helpers import DTYPES, assert_close

import oasr_norm
from oasr_jit.testing import poison_, skip_unless_gpu
from oasr_norm import _jit, twins
from oasr_norm._checks import activation_code

pytestmark = skip_unless_gpu()

UNARY = ["gelu", "gelu_tanh", "sigmoid", "tanh", "relu", "swish", "swoosh_l", "swoosh_r"]
OPS = [*UNARY, "glu"]
# Widths (GLU: of its output): 1; 7 and 8195, off every vector width (scalar tails, and the
# scalar kernel on strided rows); 64 and 80, around one and two vectors per 16-byte access; ASR
# channel widths (Zipformer 192/384, Conformer 256/512, Whisper 1280, FFN 4096) and 8192.
# Rows: 1, 3, and 1000 (1000 x 8192 is more than one resident wave: the grid-stride loop steps).
WIDTHS = [1, 7, 64, 80, 192, 256, 384, 512, 1280, 4096, 8192, 8195]
ROWS = [1, 3, 1000]


def _randn(*shape, dtype, scale=3.0):
    return (torch.randn(shape, device="cuda") * scale).to(dtype)


def _run(op, x, **kwargs):
    return getattr(oasr_norm, op)(x, **kwargs)


def _twin(op, x):
    return getattr(twins, op)(x)


def _out_shape(op, x):
    return (*x.shape[:-1], x.shape[-1] // 2) if op == "glu" else tuple(x.shape)


def _poisoned_out(op, x):
    return poison_(torch.empty(_out_shape(op, x), device="cuda", dtype=x.dtype))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("cols", WIDTHS)
@pytest.mark.parametrize("rows", ROWS)
@pytest.mark.parametrize("op", OPS)
def test_matches_twin(op, rows, cols, dtype):
    x = _randn(rows, 2 * cols if op == "glu" else cols, dtype=dtype)
    want = _twin(op, x)
    out = _poisoned_out(op, x)
    assert _run(op, x, out=out) is out
    assert_close(out, want)
    got = _run(op, x)
    assert got.shape == want.shape and got.dtype == dtype and got.is_contiguous()
    assert_close(got, want)


@pytest.mark.parametrize("grain", ["two vectors", "one vector", "half"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", UNARY)
def test_every_grain_of_the_contiguous_launch(op, dtype, grain):
    """A contiguous tensor gets two 16-byte vectors a thread where that makes a wave of blocks,
    else one where one-vector threads fill half a wave, else half a vector (launch_activation).
    One size in each band (from the SM count, as the launcher), off a whole vector by 3."""
    sms = torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count
    wave = sms * 16 * 128  # threads: 16 blocks of 128 on every SM
    per_vector = 16 // torch.tensor([], dtype=dtype).element_size()
    vectors = {"two vectors": 2.4 * wave, "one vector": 0.6 * wave, "half": 0.25 * wave}[grain]
    x = _randn(int(vectors * per_vector) + 3, dtype=dtype)
    out = _poisoned_out(op, x)
    assert _run(op, x, out=out) is out
    assert_close(out, _twin(op, x))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "shape", [(), (0,), (2, 0, 8), (5,), (2, 125, 256), (3, 7, 1, 80)], ids=str
)
@pytest.mark.parametrize("op", OPS)
def test_nd_and_empty_shapes(op, shape, dtype):
    if op == "glu":
        if not shape:
            pytest.skip("GLU needs a last dimension")
        shape = (*shape[:-1], 2 * shape[-1])
    x = _randn(*shape, dtype=dtype)
    out = _poisoned_out(op, x)
    assert _run(op, x, out=out) is out
    assert_close(out, _twin(op, x))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", OPS)
def test_strided_inputs_are_read_where_they_are(op, dtype):
    width = 2 * 192 if op == "glu" else 192
    wide = _randn(4, 50, 3 * width + 8, dtype=dtype)  # rows of 16-byte multiples
    odd = _randn(4, 50, 3 * width + 3, dtype=dtype)  # rows off 16 bytes
    views = {
        "channel_slice": wide[..., :width],  # vectorized strided rows
        "channel_chunk": wide[..., width : 2 * width],
        "unaligned_start": wide[..., 1 : width + 1],  # scalar strided rows
        "unaligned_rows": odd[..., :width],
        "row_slice": wide[:, ::2, :width],  # rows every 2 * (3 * width + 8) elements
        "one_row": wide[1, 3, :width],
    }
    for name, x in views.items():
        before = x.clone()
        out = _poisoned_out(op, x)
        assert _run(op, x, out=out) is out
        assert_close(out, _twin(op, x), msg=lambda m, name=name: f"{name}: {m}")
        assert torch.equal(x, before), f"{name}: the input changed"


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("cols", [7, 256, 8195])
@pytest.mark.parametrize("op", UNARY)
def test_in_place(op, cols, dtype):
    x = _randn(33, cols, dtype=dtype)
    want = _twin(op, x)
    assert _run(op, x, out=x) is x
    assert_close(x, want)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", OPS)
def test_extremes_follow_the_twin(op, dtype):
    inf, nan = float("inf"), float("nan")
    values = [
        -inf,
        -1e4,
        -100.0,
        -20.0,
        -4.0,
        -1.0,
        -1e-3,
        0.0,
        1e-3,
        1.0,
        4.0,
        20.0,
        100.0,
        1e4,
        inf,
        nan,
    ]
    v = torch.tensor(values, device="cuda")
    if op == "glu":  # every (a, b) pair: a = x[..., :256], b = x[..., 256:]
        x = torch.cat([v.repeat_interleave(len(values)), v.repeat(len(values))]).to(dtype)
    else:
        x = v.repeat(64).to(dtype)  # 1024 values: the vector path
    out = _poisoned_out(op, x[None])
    _run(op, x[None], out=out)
    assert_close(out, _twin(op, x[None]), equal_nan=True)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_every_16bit_pattern_converts_exactly(dtype):
    """relu passes every non-negative value through unchanged, so its output shows the kernels'
    conversions to float and back (oasr::to_float / from_float, shared by every family) on all
    65536 bit patterns: subnormals, infinities and NaNs included."""
    bits = torch.arange(-(2**15), 2**15, dtype=torch.int32).to(torch.int16)
    x = bits.view(dtype).cuda()
    out = _poisoned_out("relu", x[None])
    oasr_norm.relu(x[None], out=out)
    expected = torch.where(x > 0, x, torch.zeros_like(x))  # NaN > 0 is false: NaN is kept below
    expected = torch.where(x.isnan(), x, expected)
    torch.testing.assert_close(out[0], expected, rtol=0, atol=0, equal_nan=True)
    positive = ~x.isnan() & (x > 0)
    assert torch.equal(out[0][positive].view(torch.int16), x[positive].view(torch.int16))


def test_overlapping_out_is_refused_by_the_op():
    buf = _randn(2 * 256, dtype=torch.float32)
    x, out = buf[:256].view(4, 64), buf[64 : 64 + 256].view(4, 64)
    with pytest.raises(ValueError, match="shares storage"):
        oasr_norm.swish(x, out=out)
    with pytest.raises(ValueError, match="shares storage"):
        oasr_norm.glu(x, out=buf[:128].view(4, 32))


def _healthy():
    x = _randn(4, 64, dtype=torch.float32)
    out = oasr_norm.gelu(x)
    torch.cuda.synchronize()
    assert_close(out, twins.gelu(x))


def test_launcher_refusals_raise_and_leave_the_context_healthy():
    mod = _jit.module("activation")
    code = activation_code("gelu")
    x = _randn(4, 64, dtype=torch.float32)
    out = torch.empty_like(x)
    with pytest.raises(ValueError, match="CUDA tensor"):
        mod.activation(out.cpu(), x, code)
    with pytest.raises(ValueError, match="x is on device"):
        mod.activation(out, x.cpu(), code)
    with pytest.raises(TypeError, match="same dtype"):
        mod.activation(out.half(), x, code)
    with pytest.raises(TypeError, match="x has dtype float64"):
        mod.activation(out.double(), x.double(), code)
    with pytest.raises(ValueError, match="same shape"):
        mod.activation(torch.empty(4, 63, device="cuda"), x, code)
    with pytest.raises(ValueError, match="contiguous"):
        mod.activation(torch.empty(64, 4, device="cuda").t(), x, code)
    with pytest.raises(ValueError, match="uniformly strided rows"):
        mod.activation(
            torch.empty(4, 3, 64, device="cuda"), _randn(8, 3, 64, dtype=x.dtype)[::2], code
        )
    buf = _randn(2 * 256, dtype=x.dtype)
    with pytest.raises(ValueError, match="shares storage"):
        mod.activation(buf[64 : 64 + 256].view(4, 64), buf[:256].view(4, 64), code)
    for bad in (0, activation_code("swoosh_r") + 1, -1):
        with pytest.raises(ValueError, match="activation code"):
            mod.activation(out, x, bad)
    with pytest.raises(ValueError, match="even"):
        mod.glu(torch.empty(4, 32, device="cuda"), _randn(4, 63, dtype=x.dtype))
    with pytest.raises(ValueError, match="halved"):
        mod.glu(torch.empty(4, 64, device="cuda"), x)
    with pytest.raises(ValueError, match="shares storage"):
        mod.glu(x.view(-1)[:128].view(4, 32), x)
    with pytest.raises(TypeError, match="x has dtype float64"):
        mod.glu(torch.empty(4, 32, device="cuda", dtype=torch.float64), x.double())
    _healthy()


@pytest.mark.parametrize("op", OPS)
def test_cuda_graph_capture_on_a_side_stream(op):
    dtype = torch.bfloat16
    x = _randn(64, 2 * 256 if op == "glu" else 256, dtype=dtype)
    out = torch.empty(_out_shape(op, x), device="cuda", dtype=dtype)
    _run(op, x, out=out)  # build and load outside the capture
    graph = torch.cuda.CUDAGraph()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side), torch.cuda.graph(graph, stream=side):
        _run(op, x, out=out)
    torch.cuda.current_stream().wait_stream(side)
    for _ in range(3):
        x.copy_(_randn(*x.shape, dtype=dtype))
        poison_(out)
        graph.replay()
        torch.cuda.synchronize()
        assert_close(out, _twin(op, x))


# ---------------------------------------------------------------------------------------------
# exact GELU of large 16-bit tensors: the table kernel (gelu_table.cuh), whose bits must be the
# erff kernel's (and so PyTorch's) on every input

HALF_DTYPES = [torch.float16, torch.bfloat16]
TABLE_MIN_ELEMENTS = 1 << 22  # kGeluTableMinElements


def _every_pattern(dtype):
    return torch.arange(-(2**15), 2**15, dtype=torch.int32).to(torch.int16).view(dtype).cuda()


def _bits(t):
    return t.view(torch.int16)


def _erff_gelu_of_bits(dtype):
    """out[b + 2^15] = the erff kernel's GELU of the dtype value with bits b (64K elements: the
    activation launcher's erff kernel)."""
    x = _every_pattern(dtype)
    out = _poisoned_out("gelu", x[None])[0]
    oasr_norm.gelu(x[None], out=out[None])
    return out


def _expected_gelu(x):
    """The erff kernel's bits for every element of a 16-bit tensor, by lookup."""
    table = _bits(_erff_gelu_of_bits(x.dtype))
    return table[_bits(x).long() + 2**15].view(x.dtype)


@pytest.mark.parametrize("dtype", HALF_DTYPES)
def test_gelu_table_kernel_has_the_erff_kernels_bits_on_every_16bit_input(dtype):
    x = _every_pattern(dtype)[None]
    erff = _erff_gelu_of_bits(dtype)[None]
    out = _poisoned_out("gelu", x)
    _jit.module("activation").gelu_table(out, x)
    assert torch.equal(_bits(out), _bits(erff))
    # and PyTorch's (its float32 formula, rounded once), NaN payloads aside
    torch.testing.assert_close(erff, twins.gelu(x), rtol=0, atol=0, equal_nan=True)


# (rows, cols): at the table threshold, off every vector (a tail of n % 8), a walk of ~60 steps
@pytest.mark.parametrize("shape", [(2048, 2048), (2001, 2099), (8000, 2048)], ids=str)
@pytest.mark.parametrize("dtype", HALF_DTYPES)
def test_large_gelu_takes_the_table_with_the_same_bits(dtype, shape):
    assert shape[0] * shape[1] >= TABLE_MIN_ELEMENTS
    bits = torch.randint(-(2**15), 2**15, shape, dtype=torch.int32, device="cuda")
    for x in (_randn(*shape, dtype=dtype), bits.to(torch.int16).view(dtype)):
        want = _expected_gelu(x)
        out = _poisoned_out("gelu", x)
        assert oasr_norm.gelu(x, out=out) is out
        assert torch.equal(_bits(out), _bits(want))
        forced = _poisoned_out("gelu", x)
        _jit.module("activation").gelu_table(forced, x)
        assert torch.equal(_bits(forced), _bits(want))
        oasr_norm.gelu(x, out=x)  # in place
        assert torch.equal(_bits(x), _bits(want))


@pytest.mark.parametrize("dtype", HALF_DTYPES)
def test_large_strided_gelu_keeps_the_bits(dtype):
    wide = _randn(1024, 2 * 4096 + 8, dtype=dtype)
    for x in (wide[:, :4096], wide[:, 1:4097], _randn(4096 * 1025 + 1, dtype=dtype)[1:]):
        out = _poisoned_out("gelu", x)
        oasr_norm.gelu(x, out=out)
        assert torch.equal(_bits(out), _bits(_expected_gelu(x)))


def test_gelu_table_refusals_raise_and_leave_the_context_healthy():
    mod = _jit.module("activation")
    x = _randn(4, 64, dtype=torch.float16)
    out = torch.empty_like(x)
    with pytest.raises(TypeError, match="x has dtype float32"):
        mod.gelu_table(out.float(), x.float())
    with pytest.raises(TypeError, match="same dtype"):
        mod.gelu_table(out.bfloat16(), x)
    with pytest.raises(ValueError, match="same shape"):
        mod.gelu_table(torch.empty(4, 63, device="cuda", dtype=x.dtype), x)
    with pytest.raises(ValueError, match="contiguous"):
        mod.gelu_table(out, _randn(4, 128, dtype=x.dtype)[:, :64])
    with pytest.raises(ValueError, match="16-byte boundary"):
        mod.gelu_table(out.view(-1)[:255], _randn(257, dtype=x.dtype)[1:256])
    buf = _randn(2 * 256, dtype=x.dtype)
    with pytest.raises(ValueError, match="shares storage"):
        mod.gelu_table(buf[64 : 64 + 256].view(4, 64), buf[:256].view(4, 64))
    _healthy()


def test_large_gelu_in_a_cuda_graph_before_and_after_the_tables_exist():
    """In a fresh process the first large GELU is captured before the tables exist: the erff
    kernel runs in the graph; after an eager call has made them, a new capture runs the table
    kernel. Both replays give PyTorch's bits, and gelu_table refuses to make the tables inside a
    capture."""
    import subprocess
    import sys

    code = """
import torch, oasr_norm
from oasr_norm import _jit
x = (torch.randn(2048, 2048, device="cuda") * 3).half()
out = torch.empty_like(x)
oasr_norm.gelu(x[:4])  # load the module and the erff kernel outside any capture


def captured(fn):
    graph, side = torch.cuda.CUDAGraph(), torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side), torch.cuda.graph(graph, stream=side):
        fn()
    torch.cuda.current_stream().wait_stream(side)
    return graph


def check(graph):
    x.copy_((torch.randn(2048, 2048, device="cuda") * 3).half())
    out.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(out.view(torch.int16), torch.nn.functional.gelu(x).view(torch.int16))


check(captured(lambda: oasr_norm.gelu(x, out=out)))  # no tables yet: erff
try:
    captured(lambda: _jit.module("activation").gelu_table(out, x))
    raise AssertionError("gelu_table made the tables inside a capture")
except RuntimeError as e:
    assert "before capturing" in str(e), e
oasr_norm.gelu(x, out=out)  # eager: makes the tables
check(captured(lambda: oasr_norm.gelu(x, out=out)))  # the table kernel
print("ok")
"""
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert run.returncode == 0 and run.stdout.strip().endswith("ok"), run.stdout + run.stderr


def test_large_gelu_makes_the_tables_beside_another_streams_capture():
    """In a fresh process the first large GELU runs on a stream that is not capturing while this
    thread captures another stream (global mode): the tables are made (the thread's capture mode
    relaxed meanwhile), the capture is not broken, and the bits are PyTorch's."""
    import subprocess
    import sys

    code = """
import torch, oasr_norm
x = (torch.randn(2048, 2048, device="cuda") * 3).half()
out = torch.empty_like(x)
y = torch.empty_like(x[:4])
oasr_norm.gelu(x[:4], out=y)  # load the module outside any capture
graph, side, other = torch.cuda.CUDAGraph(), torch.cuda.Stream(), torch.cuda.Stream()
side.wait_stream(torch.cuda.current_stream())
other.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(side), torch.cuda.graph(graph, stream=side):
    oasr_norm.gelu(x[:4], out=y)  # captured
    with torch.cuda.stream(other):
        oasr_norm.gelu(x, out=out)  # eager, beside the capture: makes the tables
torch.cuda.synchronize()
assert torch.equal(out.view(torch.int16), torch.nn.functional.gelu(x).view(torch.int16))
y.fill_(float("nan"))
graph.replay()
torch.cuda.synchronize()
assert torch.equal(y.view(torch.int16), torch.nn.functional.gelu(x[:4]).view(torch.int16))
print("ok")
"""
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert run.returncode == 0 and run.stdout.strip().endswith("ok"), run.stdout + run.stderr
