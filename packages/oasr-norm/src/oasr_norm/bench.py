"""Benchmark routines of the norm family: ``oasr bench norm [--suite asr|quick]``.

Each case times an `oasr_norm` op against what a PyTorch user writes today (eager
``torch.nn.functional``), on the ASR shapes of docs/benchmarks.md, in fp16 and bf16.
``bytes_moved`` counts each input read once and each output written once, parameters included;
the ops are memory-bound, so no FLOP counts are given.

Importing this module is cheap: torch and the ops are imported inside the functions.
"""

from __future__ import annotations

import functools

DTYPES = ("fp16", "bf16")
#: M = batch × frames after 4× subsampling: 32 × 250 (8 s) and 64 × 500 (20 s) utterances
NORM_ROWS = (8000, 32000)
#: model widths: Conformer (WeNet-S) 256, icefall-L / Zipformer 512, FastConformer-XL 1024,
#: Whisper-large 1280
NORM_WIDTHS = (256, 512, 1024, 1280)
#: FFN hidden activations: one Conformer utterance 250 × 2048 (batch 1, streaming), a batch
#: 8000 × 2048, Whisper 32000 × 5120
ACTIVATION_SHAPES = ((250, 2048), (8000, 2048), (32000, 5120))
#: GLU of the conv module's pointwise output, [M, 2C] -> [M, C]
GLU_SHAPES = ((8000, 1024), (32000, 2048))
#: attention scores [B, H, Tq, Tk]: Conformer B32 H8 T250, Whisper-large B16 H20 T1500
SOFTMAX_SHAPES = ((32, 8, 250, 250), (16, 20, 1500, 1500))
#: CTC head: M = 8000 frames, vocabulary 5000
LOG_SOFTMAX_SHAPES = ((8000, 5000),)
#: rel-pos attention scores with a float bias (B32 H4 T250, WeNet-S)
MASKED_SOFTMAX_SHAPES = ((32, 4, 250, 250),)
#: the conv module's BatchNorm, [B, T, C] channels last (icefall-L: C 512)
BATCH_NORM_SHAPES = ((32, 250, 512),)

#: the fp16 shapes of suite "quick": one or two per op (docs/benchmarks.md's PyTorch rows first)
QUICK = {
    "layer_norm": {(8000, 256), (32000, 1280)},
    "rms_norm": {(32000, 512)},
    "add_layer_norm": {(32000, 512)},
    "add_rms_norm": {(32000, 512)},
    "layer_norm+swish": {(8000, 512)},
    "activation": {(8000, 2048)},
    "glu": {(8000, 1024)},
    "softmax": {(32, 8, 250, 250)},
    "log_softmax": {(8000, 5000)},
    "masked_softmax": {(32, 4, 250, 250)},
    "batch_norm1d": {(32, 250, 512)},
}

LAYER_NORM_EPS = 1e-5
RMS_NORM_EPS = 1e-6
BATCH_NORM_EPS = 1e-5
#: 1 / sqrt(head dim 64)
ATTENTION_SCALE = 0.125
#: the Zipformer activations' constants (icefall's SwooshL / SwooshR)
SWOOSH_L_SHIFT, SWOOSH_L_OFFSET = 4.0, 0.035
SWOOSH_R_SHIFT, SWOOSH_R_OFFSET = 1.0, 0.313261687
SWOOSH_SLOPE = 0.08


def routines(suite: str) -> list:
    """Every case in ``suite`` ("asr": the full grid; "quick": one or two fp16 shapes per op)."""
    return [case for case in all_cases() if suite in case.suites]


def all_cases(device: str = "cuda") -> list:
    return [
        *_norm_cases(device),
        *_activation_cases(device),
        *_softmax_cases(device),
        *_batch_norm_cases(device),
    ]


# ---------------------------------------------------------------------------------------------
# helpers


def _torch_dtype(dtype: str):
    import torch

    return {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}[dtype]


def _elt_bytes(dtype: str) -> int:
    return {"fp16": 2, "bf16": 2, "fp32": 4}[dtype]


def _label(shape) -> str:
    return "x".join(str(n) for n in shape)


def _case(op, dtype, shape, *, quick_key=None, label=None, **fields):
    """A Case named ``"<op> <dtype> <shape>"``, in suite "quick" too when its fp16 shape is
    listed in QUICK[quick_key or op]."""
    from oasr_jit.bench import Case

    suites = {"asr"}
    if dtype == "fp16" and tuple(shape) in QUICK.get(quick_key or op, ()):
        suites.add("quick")
    label = label or _label(shape)
    return Case(
        name=f"{op} {dtype} {label}", op=op, dtype=dtype, shape=label, suites=suites, **fields
    )


def _randn(shape, dtype: str, device: str, scale: float = 1.0, shift: float = 0.0):
    import torch

    x = torch.randn(shape, device=device, dtype=torch.float32)
    return (x * scale + shift).to(_torch_dtype(dtype))


def _params(width: int, dtype: str, device: str) -> dict:
    """An affine weight near 1 and a bias near 0, neither trivial."""
    return {
        "weight": _randn((width,), dtype, device, scale=0.1, shift=1.0),
        "bias": _randn((width,), dtype, device, scale=0.1),
    }


# ---------------------------------------------------------------------------------------------
# layer_norm, rms_norm, add + norm, layer_norm + swish


def _norm_cases(device: str) -> list:
    cases = []
    for dtype in DTYPES:
        for rows in NORM_ROWS:
            for width in NORM_WIDTHS:
                args = (dtype, rows, width, device)
                cases += [
                    _layer_norm_case(*args),
                    _rms_norm_case(*args),
                    _add_layer_norm_case(*args),
                    _add_rms_norm_case(*args),
                    _layer_norm_case(*args, activation="swish"),
                ]
    return cases


def _layer_norm_case(dtype, rows, width, device, activation=None) -> object:
    import torch.nn.functional as F

    import oasr_norm

    def setup():
        return {"x": _randn((rows, width), dtype, device), **_params(width, dtype, device)}

    def oasr(i):
        return oasr_norm.layer_norm(
            i["x"], i["weight"], i["bias"], LAYER_NORM_EPS, activation=activation
        )

    def peer(i):
        y = F.layer_norm(i["x"], (width,), i["weight"], i["bias"], LAYER_NORM_EPS)
        return y if activation is None else F.silu(y)

    op = "layer_norm" if activation is None else f"layer_norm+{activation}"
    elt = _elt_bytes(dtype)
    return _case(
        op,
        dtype,
        (rows, width),
        setup=setup,
        oasr=oasr,
        peer=peer,
        peer_name="F.layer_norm" if activation is None else "F.silu(F.layer_norm)",
        bytes_moved=elt * (2 * rows * width + 2 * width),
    )


def _rms_norm_case(dtype, rows, width, device) -> object:
    import torch.nn.functional as F

    import oasr_norm

    def setup():
        return {
            "x": _randn((rows, width), dtype, device),
            "weight": _params(width, dtype, device)["weight"],
        }

    def oasr(i):
        return oasr_norm.rms_norm(i["x"], i["weight"], RMS_NORM_EPS)

    def peer(i):
        return F.rms_norm(i["x"], (width,), i["weight"], RMS_NORM_EPS)

    return _case(
        "rms_norm",
        dtype,
        (rows, width),
        setup=setup,
        oasr=oasr,
        peer=peer,
        peer_name="F.rms_norm",
        bytes_moved=_elt_bytes(dtype) * (2 * rows * width + width),
    )


def _add_norm_setup(dtype, rows, width, device, with_bias: bool):
    def setup():
        params = _params(width, dtype, device)
        if not with_bias:
            del params["bias"]
        return {
            "x": _randn((rows, width), dtype, device),
            "residual": _randn((rows, width), dtype, device),
            **params,
        }

    return setup


def _add_layer_norm_case(dtype, rows, width, device) -> object:
    import torch.nn.functional as F

    import oasr_norm

    def oasr(i):
        return oasr_norm.add_layer_norm(
            i["x"], i["residual"], i["weight"], i["bias"], LAYER_NORM_EPS
        )

    def peer(i):
        s = i["x"] + i["residual"]
        return F.layer_norm(s, (width,), i["weight"], i["bias"], LAYER_NORM_EPS), s

    # reads x and residual, writes the normalized rows and the sum
    return _case(
        "add_layer_norm",
        dtype,
        (rows, width),
        setup=_add_norm_setup(dtype, rows, width, device, with_bias=True),
        oasr=oasr,
        peer=peer,
        peer_name="x + residual; F.layer_norm",
        bytes_moved=_elt_bytes(dtype) * (4 * rows * width + 2 * width),
    )


def _add_rms_norm_case(dtype, rows, width, device) -> object:
    import torch.nn.functional as F

    import oasr_norm

    def oasr(i):
        return oasr_norm.add_rms_norm(i["x"], i["residual"], i["weight"], RMS_NORM_EPS)

    def peer(i):
        s = i["x"] + i["residual"]
        return F.rms_norm(s, (width,), i["weight"], RMS_NORM_EPS), s

    return _case(
        "add_rms_norm",
        dtype,
        (rows, width),
        setup=_add_norm_setup(dtype, rows, width, device, with_bias=False),
        oasr=oasr,
        peer=peer,
        peer_name="x + residual; F.rms_norm",
        bytes_moved=_elt_bytes(dtype) * (4 * rows * width + width),
    )


# ---------------------------------------------------------------------------------------------
# activations


def _swoosh_l(x, zero):
    import torch

    return torch.logaddexp(zero, x - SWOOSH_L_SHIFT) - SWOOSH_SLOPE * x - SWOOSH_L_OFFSET


def _swoosh_r(x, zero):
    import torch

    return torch.logaddexp(zero, x - SWOOSH_R_SHIFT) - SWOOSH_SLOPE * x - SWOOSH_R_OFFSET


def _activation_peers() -> dict:
    """op -> (peer taking the inputs dict, its name)."""
    import torch
    import torch.nn.functional as F

    gelu_tanh = functools.partial(F.gelu, approximate="tanh")
    plain = {
        "gelu": (F.gelu, "F.gelu"),
        "gelu_tanh": (gelu_tanh, 'F.gelu(approximate="tanh")'),
        "sigmoid": (torch.sigmoid, "torch.sigmoid"),
        "tanh": (torch.tanh, "torch.tanh"),
        "relu": (torch.relu, "torch.relu"),
        "swish": (F.silu, "F.silu"),
    }
    peers = {op: (lambda i, fn=fn: fn(i["x"]), name) for op, (fn, name) in plain.items()}
    # Zipformer's formulas in eager torch; the 0-dim zero is made once in setup (made per call
    # from a Python float it would be a host-to-device copy, which no CUDA graph can hold).
    peers["swoosh_l"] = (lambda i: _swoosh_l(i["x"], i["zero"]), "torch logaddexp formula")
    peers["swoosh_r"] = (lambda i: _swoosh_r(i["x"], i["zero"]), "torch logaddexp formula")
    return peers


def _activation_cases(device: str) -> list:
    import torch

    import oasr_norm

    cases = []
    for op, (peer, peer_name) in _activation_peers().items():
        for dtype in DTYPES:
            for shape in ACTIVATION_SHAPES:

                def setup(shape=shape, dtype=dtype):
                    x = _randn(shape, dtype, device)
                    return {"x": x, "zero": torch.zeros((), dtype=x.dtype, device=device)}

                def oasr(i, op=op):
                    return getattr(oasr_norm, op)(i["x"])

                cases.append(
                    _case(
                        op,
                        dtype,
                        shape,
                        quick_key="activation",
                        setup=setup,
                        oasr=oasr,
                        peer=peer,
                        peer_name=peer_name,
                        bytes_moved=_elt_bytes(dtype) * 2 * shape[0] * shape[1],
                    )
                )
    cases += [_glu_case(dtype, shape, device) for dtype in DTYPES for shape in GLU_SHAPES]
    return cases


def _glu_case(dtype, shape, device) -> object:
    import torch.nn.functional as F

    import oasr_norm

    rows, width = shape

    def setup():
        return {"x": _randn(shape, dtype, device)}

    return _case(
        "glu",
        dtype,
        shape,
        label=f"{rows}x{width}->{width // 2}",
        setup=setup,
        oasr=lambda i: oasr_norm.glu(i["x"], dim=-1),
        peer=lambda i: F.glu(i["x"], dim=-1),
        peer_name="F.glu",
        bytes_moved=_elt_bytes(dtype) * (rows * width + rows * width // 2),
    )


# ---------------------------------------------------------------------------------------------
# softmax, log_softmax, masked softmax


def _softmax_cases(device: str) -> list:
    import torch

    import oasr_norm

    cases = []
    for op, shapes, peer_fn in (
        ("softmax", SOFTMAX_SHAPES, torch.softmax),
        ("log_softmax", LOG_SOFTMAX_SHAPES, torch.log_softmax),
    ):
        for dtype in DTYPES:
            for shape in shapes:
                numel = 1
                for n in shape:
                    numel *= n

                def setup(shape=shape, dtype=dtype):
                    return {"x": _randn(shape, dtype, device)}

                def oasr(i, op=op):
                    return getattr(oasr_norm, op)(i["x"], dim=-1)

                def peer(i, peer_fn=peer_fn):
                    return peer_fn(i["x"], dim=-1)

                cases.append(
                    _case(
                        op,
                        dtype,
                        shape,
                        setup=setup,
                        oasr=oasr,
                        peer=peer,
                        peer_name=f"torch.{op}",
                        bytes_moved=_elt_bytes(dtype) * 2 * numel,
                    )
                )
    cases += [
        _masked_softmax_case(dtype, shape, window, device)
        for dtype in DTYPES
        for shape in MASKED_SOFTMAX_SHAPES
        for window in (False, True)
    ]
    return cases


def _masked_softmax_case(dtype, shape, window, device) -> object:
    """A key padding mask and a bias: dense [B, H, Tq, Tk], or (window) a relative-position
    window bias[b, h, q, k] = P[h, q + k] over a [H, Tq + Tk - 1] table, as Zipformer's and
    Conformer's attention make it (read in place through its strides)."""
    import torch

    import oasr_norm

    batch, heads, tq, tk = shape
    table = tq + tk - 1

    def setup():
        # Key lengths between half and all of Tk: every row keeps at least one key.
        lengths = torch.randint(tk // 2, tk + 1, (batch,), device=device)
        padded = torch.arange(tk, device=device)[None, :] >= lengths[:, None]  # [B, Tk]
        if window:
            p = _randn((heads, table), dtype, device)
            bias = p.as_strided(shape, (0, table, 1, 1))
        else:
            bias = _randn(shape, dtype, device)
        return {"scores": _randn(shape, dtype, device), "bias": bias, "key_padding_mask": padded}

    def oasr(i):
        return oasr_norm.masked_softmax(
            i["scores"],
            bias=i["bias"],
            key_padding_mask=i["key_padding_mask"],
            scale=ATTENTION_SCALE,
        )

    def peer(i):
        s = i["scores"] * ATTENTION_SCALE + i["bias"]
        s = s.masked_fill(i["key_padding_mask"][:, None, None, :], float("-inf"))
        # The op's contract: a fully masked row is zeros, where softmax gives NaN.
        return s.softmax(-1).nan_to_num(0.0)

    numel = batch * heads * tq * tk
    bias_numel = heads * table if window else numel
    return _case(
        "masked_softmax",
        dtype,
        shape,
        label=_label(shape) + (" window" if window else ""),
        setup=setup,
        oasr=oasr,
        peer=peer,
        peer_name="eager masked_fill, softmax",
        # scores and bias (a window: its table) read, probabilities written, the mask once
        bytes_moved=_elt_bytes(dtype) * (2 * numel + bias_numel) + batch * tk,
    )


# ---------------------------------------------------------------------------------------------
# batch_norm1d (inference), plain and + swish


def _batch_norm_cases(device: str) -> list:
    return [
        _batch_norm_case(dtype, shape, device, activation)
        for dtype in DTYPES
        for shape in BATCH_NORM_SHAPES
        for activation in (None, "swish")
    ]


def _batch_norm_case(dtype, shape, device, activation) -> object:
    import torch
    import torch.nn.functional as F

    import oasr_norm

    batch, frames, channels = shape

    def setup():
        return {
            "x": _randn(shape, dtype, device),
            "running_mean": _randn((channels,), dtype, device, scale=0.1),
            # a variance: positive, around 1
            "running_var": (torch.rand(channels, device=device) + 0.5).to(_torch_dtype(dtype)),
            **_params(channels, dtype, device),
        }

    def oasr(i):
        return oasr_norm.batch_norm1d(
            i["x"],
            i["running_mean"],
            i["running_var"],
            i["weight"],
            i["bias"],
            BATCH_NORM_EPS,
            activation=activation,
        )

    def peer(i):
        # as a PyTorch model runs it: BatchNorm1d wants [B, C, T]
        y = F.batch_norm(
            i["x"].transpose(1, 2),
            i["running_mean"],
            i["running_var"],
            i["weight"],
            i["bias"],
            training=False,
            eps=BATCH_NORM_EPS,
        )
        if activation is not None:
            y = F.silu(y)
        return y.transpose(1, 2)

    op = "batch_norm1d" if activation is None else f"batch_norm1d+{activation}"
    return _case(
        op,
        dtype,
        shape,
        quick_key="batch_norm1d",
        setup=setup,
        oasr=oasr,
        peer=peer,
        peer_name="F.batch_norm on [B,C,T]" if activation is None else "F.silu(F.batch_norm)",
        bytes_moved=_elt_bytes(dtype) * (2 * batch * frames * channels + 4 * channels),
    )
