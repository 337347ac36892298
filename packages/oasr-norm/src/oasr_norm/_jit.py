"""JIT generators of the norm family.

    oasr_norm_<op>[_act]_<dtype>  one row norm for one dtype: op in ROW_NORM_OPS (layer, rms,
                                  add_layer, add_rms, bias), _act the fused-activation kernels
                                  (not for bias); 11 kernels each, so a first call compiles
                                  what it can launch and nothing else
    oasr_norm_channels            batch_norm1d (BTC, per channel) and group_norm
    oasr_norm_activation          the elementwise activations and GLU
    oasr_norm_softmax             softmax, log_softmax
    oasr_norm_masked_softmax_<dtype>  masked_softmax for one dtype of scores (with a bias of
                                  that dtype or float32)

Module names carry no arch: the key does (one architecture per process).
"""

from __future__ import annotations

import functools
from pathlib import Path

from oasr_jit import JitSpec, gen_jinja_jit_spec, gen_jit_spec

PACKAGE_DIR = Path(__file__).resolve().parent
INCLUDE_DIR = PACKAGE_DIR / "include"
CSRC_DIR = PACKAGE_DIR / "csrc"
TEMPLATE_DIR = PACKAGE_DIR / "templates"

#: dtype name in module/TU names -> C++ type
DTYPES = {"fp32": "float", "fp16": "oasr::half", "bf16": "oasr::bfloat16"}


def _csrc(*names: str) -> list[Path]:
    return [CSRC_DIR / n for n in names]


#: row-norm op -> (RowNormKind, fused residual add)
ROW_NORM_OPS = {
    "layer": ("kLayer", False),
    "rms": ("kRms", False),
    "add_layer": ("kLayer", True),
    "add_rms": ("kRms", True),
    "bias": ("kBias", False),
}


def row_norm_name(op: str, dtype: str, activated: bool = False) -> str:
    """The module of one row norm: ``oasr_norm_layer_fp16``, ``oasr_norm_add_rms_act_bf16``."""
    if op not in ROW_NORM_OPS:
        raise ValueError(f"unknown row-norm op {op!r}; one of {sorted(ROW_NORM_OPS)}")
    if dtype not in DTYPES:
        raise ValueError(f"unknown dtype {dtype!r}; one of {sorted(DTYPES)}")
    if activated and op == "bias":
        raise ValueError("bias_norm has no fused activation")
    return f"oasr_norm_{op}{'_act' if activated else ''}_{dtype}"


def row_norm_variants() -> list[tuple[str, str, bool]]:
    """Every (op, dtype, activated) with a module."""
    return [
        (op, dtype, activated)
        for op in ROW_NORM_OPS
        for activated in ((False,) if op == "bias" else (False, True))
        for dtype in DTYPES
    ]


def gen_row_norm_module(op: str, dtype: str, activated: bool = False) -> JitSpec:
    name = row_norm_name(op, dtype, activated)
    kind, add = ROW_NORM_OPS[op]
    context = {
        "module": name,
        "dtype": DTYPES[dtype],
        "kind": kind,
        "add": add,
        "activated": activated,
    }
    # One CUDA unit (launcher + kernels) and the exports as host C++ (no nvcc front end).
    return gen_jinja_jit_spec(
        name,
        [(f"{name}.cu", TEMPLATE_DIR / "row_norm.cu.jinja", context)],
        sources=_csrc("row_norm_jit_binding.cc"),
        extra_include_dirs=[INCLUDE_DIR, CSRC_DIR],
    )


def gen_channel_norm_module() -> JitSpec:
    return gen_jit_spec(
        "oasr_norm_channels",
        _csrc("channel_norm.cu", "channel_norm_jit_binding.cu"),
        extra_include_dirs=[INCLUDE_DIR, CSRC_DIR],
    )


def gen_activation_module() -> JitSpec:
    return gen_jit_spec(
        "oasr_norm_activation",
        _csrc("activation.cu", "activation_jit_binding.cu"),
        extra_include_dirs=[INCLUDE_DIR, CSRC_DIR],
    )


def gen_softmax_module() -> JitSpec:
    return gen_jit_spec(
        "oasr_norm_softmax",
        _csrc("softmax.cu", "softmax_jit_binding.cc"),
        extra_include_dirs=[INCLUDE_DIR, CSRC_DIR],
    )


def masked_softmax_name(dtype: str) -> str:
    """The module of masked_softmax for one dtype: ``oasr_norm_masked_softmax_fp16``."""
    if dtype not in DTYPES:
        raise ValueError(f"unknown dtype {dtype!r}; one of {sorted(DTYPES)}")
    return f"oasr_norm_masked_softmax_{dtype}"


def gen_masked_softmax_module(dtype: str) -> JitSpec:
    name = masked_softmax_name(dtype)
    return gen_jinja_jit_spec(
        name,
        [
            (
                f"{name}.cu",
                TEMPLATE_DIR / "masked_softmax.cu.jinja",
                {"module": name, "dtype": DTYPES[dtype]},
            )
        ],
        sources=_csrc("masked_softmax_jit_binding.cc"),
        extra_include_dirs=[INCLUDE_DIR, CSRC_DIR],
    )


GENERATORS = {
    "channels": gen_channel_norm_module,
    "activation": gen_activation_module,
    "softmax": gen_softmax_module,
}


def production_specs(arch) -> list[JitSpec]:
    """Every module of the family (all are production modules; none is arch-specific)."""
    rows = [gen_row_norm_module(*variant) for variant in row_norm_variants()]
    masked = [gen_masked_softmax_module(dtype) for dtype in DTYPES]
    return [*rows, *(gen() for gen in GENERATORS.values()), *masked]


@functools.cache
def module(kind: str):
    """The loaded module of one kind ("channels", "activation", "softmax")."""
    return GENERATORS[kind]().build_and_load()


@functools.cache
def row_norm_module(op: str, dtype: str, activated: bool = False):
    """The loaded module of one row norm (`row_norm_name`)."""
    return gen_row_norm_module(op, dtype, activated).build_and_load()


@functools.cache
def masked_softmax_module(dtype: str):
    """The loaded masked-softmax module of one dtype (`masked_softmax_name`)."""
    return gen_masked_softmax_module(dtype).build_and_load()
