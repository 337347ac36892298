"""JIT generators of the norm family: four modules, each holding every dtype.

    oasr_norm_rows        layer/RMS/bias norm (+ fused add, + fused activation), one rendered
                          TU per dtype so nvcc builds them in parallel
    oasr_norm_channels    batch_norm1d (BTC, per channel) and group_norm
    oasr_norm_activation  the elementwise activations and GLU
    oasr_norm_softmax     softmax, log_softmax, masked_softmax

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


def gen_row_norm_module() -> JitSpec:
    templates = [
        (f"row_norm_{tag}.cu", TEMPLATE_DIR / "row_norm.cu.jinja", {"dtype": ctype})
        for tag, ctype in DTYPES.items()
    ]
    return gen_jinja_jit_spec(
        "oasr_norm_rows",
        templates,
        sources=_csrc("row_norm.cu", "row_norm_jit_binding.cu"),
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
        _csrc("softmax.cu", "softmax_jit_binding.cu"),
        extra_include_dirs=[INCLUDE_DIR, CSRC_DIR],
    )


GENERATORS = {
    "rows": gen_row_norm_module,
    "channels": gen_channel_norm_module,
    "activation": gen_activation_module,
    "softmax": gen_softmax_module,
}


def production_specs(arch) -> list[JitSpec]:
    """Every module of the family (all are production modules; none is arch-specific)."""
    return [gen() for gen in GENERATORS.values()]


@functools.cache
def module(kind: str):
    """The loaded module of one kind ("rows", "channels", "activation", "softmax")."""
    return GENERATORS[kind]().build_and_load()
