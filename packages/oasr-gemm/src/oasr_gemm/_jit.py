"""JIT generators of the GEMM family: one rendered translation unit per (config, dtype,
activation), from the template of the config's lane (sm90: TMA + wgmma; sm80: mma.sync with
split-K / Stream-K); the activation is compiled into the epilogue
(include/oasr/gemm/gemm_activation.cuh says why).

    oasr_gemm[_<act>]_<dtype>_<config>[_c]  one config in one dtype with one epilogue: the
                             identity (gemm: a bias, no activation) or activation <act> (relu,
                             swish, gelu, gelu_tanh); ``_c`` for the sm90 kernels that add a
                             matrix C (the sm80 lane's take C at run time;
                             include/oasr/gemm/gemm_sm90_template.cuh says why sm90's do not).
                             One CUTLASS unit each, built on the first call that selects it, so
                             a first GEMM waits for one unit, not a table's worth. `oasr jit
                             prebuild` builds those of the production configs (the default, the
                             basis, the configs the shipped tuning file names); a tuning run or
                             a user-tier entry builds any other config the same way
    oasr_gemm_bmm      bmm: per dtype and B layout, the launcher with the general lane (CUTLASS
                       2.x) and a unit per config of the tuned lane (sm90, configs.BMM_TUNED)
    oasr_gemm_group    group_gemm (CUTLASS 2.x grouped): one unit per dtype
    oasr_gemm_log_softmax  gemm_log_softmax's row pass (no CUTLASS): one unit
    oasr_gemm_log_softmax_head  gemm_log_softmax in one kernel (sm90: TMA + wgmma, no
                                CUTLASS): the one-kernel head (V <= 512) and the cluster head
                                (512 < V <= 12288, K <= 512), a unit each

A CUTLASS 3.x unit takes about 45 s of one core and 4 GB (the build's job limit knows:
``use_cutlass``); modules build in parallel.
"""

from __future__ import annotations

import functools
from pathlib import Path

from oasr_jit import JitSpec, gen_jinja_jit_spec, gen_jit_spec

from .configs import (
    BMM_TUNED,
    LANE,
    SM80_LANE,
    GemmConfig,
    Sm80Config,
    lanes,
    production_configs,
)

PACKAGE_DIR = Path(__file__).resolve().parent
INCLUDE_DIR = PACKAGE_DIR / "include"
CSRC_DIR = PACKAGE_DIR / "csrc"
TEMPLATE = PACKAGE_DIR / "templates" / "gemm_sm90.cu.jinja"
SM80_TEMPLATE = PACKAGE_DIR / "templates" / "gemm_sm80.cu.jinja"
#: Sm80Config.split -> oasr::gemm::SplitK
SPLIT_ENUMS = {"none": "kNone", "serial": "kSerial", "parallel": "kParallel", "streamk": "kStreamK"}
BMM_TEMPLATE = PACKAGE_DIR / "templates" / "bmm.cu.jinja"
BMM_SM90_TEMPLATE = PACKAGE_DIR / "templates" / "bmm_sm90.cu.jinja"
GROUP_TEMPLATE = PACKAGE_DIR / "templates" / "group_gemm_sm80.cu.jinja"
#: the TVM-FFI exports of the rendered modules, one binding unit per module
GEMM_BINDING = CSRC_DIR / "gemm_jit_binding.cc.jinja"
BMM_BINDING = CSRC_DIR / "bmm_jit_binding.cc.jinja"
GROUP_BINDING = CSRC_DIR / "group_gemm_jit_binding.cc.jinja"

#: dtype tag -> CUTLASS element type
DTYPES = {"fp16": "cutlass::half_t", "bf16": "cutlass::bfloat16_t"}
#: activation -> its epilogue functor in gemm_activation.cuh (oasr_gemm.gemm_activation's names)
ACTIVATION_FUNCTORS = {
    "identity": "IdentityAct",
    "relu": "ReluAct",
    "swish": "SwishAct",
    "gelu": "GeluAct",
    "gelu_tanh": "GeluTanhAct",
}
BMM_MODULE = "oasr_gemm_bmm"
GROUP_MODULE = "oasr_gemm_group"
LOG_SOFTMAX_MODULE = "oasr_gemm_log_softmax"
HEAD_MODULE = "oasr_gemm_log_softmax_head"
#: B's layout tag -> whether B is row-major ([K, N] with a unit stride along N)
BMM_B_LAYOUTS = {"b_row": True, "b_col": False}


def _binding(name: str, template: Path, context: dict) -> tuple[str, Path, dict]:
    """The module's binding unit ``<name>_jit_binding.cc``: its exports' declarations and
    ``TVM_FFI_DLL_EXPORT_TYPED_FUNC`` lines (the rendered kernels' units export nothing). Host
    C++ (no CUDA, no CUTLASS): the host compiler builds it in a few seconds."""
    return (f"{name}_jit_binding.cc", template, {"module": name} | context)


def _activation_tag(activation: str) -> str:
    """The names' activation part: empty for the identity (the plain GEMM), else ``<act>_``."""
    if activation not in ACTIVATION_FUNCTORS:
        raise ValueError(f"no epilogue for activation {activation!r}")
    return "" if activation == "identity" else f"{activation}_"


def adds_c(config: GemmConfig | Sm80Config, with_c: bool) -> bool:
    """Whether the kernel a call with (or without) a matrix C runs is one built to add it: the
    sm90 lane's are built either way, the sm80 lane's take C at run time."""
    return with_c and config.lane != SM80_LANE


def _c_tail(config: GemmConfig | Sm80Config, with_c: bool) -> str:
    """``_c`` on the names of a kernel built to add C (and of its module)."""
    return "_c" if adds_c(config, with_c) else ""


def function_name(
    config: GemmConfig | Sm80Config, dtype: str, activation: str = "identity", with_c=False
) -> str:
    """The exported function of one variant: ``gemm_fp16_t128x128x64_c1x1_coop``, with an
    activation ``gemm_swish_fp16_t128x128x64_c1x1_coop``, adding a matrix C ``..._coop_c``
    (sm80: ``gemm_fp16_s80_...`` for calls with C or without, and ``<function>_workspace``)."""
    return f"gemm_{_activation_tag(activation)}{dtype}_{config.id}{_c_tail(config, with_c)}"


def render_context(
    config: GemmConfig | Sm80Config, dtype: str, activation: str = "identity", with_c=False
) -> dict:
    context = {
        "config_id": config.id,
        "variant": f"{_activation_tag(activation)}{config.id}{_c_tail(config, with_c)}",
        "dtype": dtype,
        "ctype": DTYPES[dtype],
        "activation": activation,
        "activation_functor": ACTIVATION_FUNCTORS[activation],
        "function": function_name(config, dtype, activation, with_c),
        "tile_m": config.tile_m,
        "tile_n": config.tile_n,
        "tile_k": config.tile_k,
    }
    if config.lane == SM80_LANE:
        return context | {
            "warp_m": config.warp_m,
            "warp_n": config.warp_n,
            "stages": config.stages,
            "split_enum": SPLIT_ENUMS[config.split],
            "slices": config.slices,
        }
    return context | {
        "cluster_m": config.cluster_m,
        "cluster_n": config.cluster_n,
        "cooperative": "true" if config.schedule == "cooperative" else "false",
        "with_c": "true" if with_c else "false",
        "other_function": function_name(config, dtype, activation, not with_c),
    }


def gen_gemm_module(
    name: str,
    configs: list,
    dtypes=tuple(DTYPES),
    activation: str = "identity",
    with_c: bool = False,
) -> JitSpec:
    """One unit per (config, dtype); configs of both lanes may share a module (the compile
    tests build several in one). ``with_c``: the sm90 configs' kernels that add a matrix C
    (sm80 configs are refused: theirs take C at run time)."""
    if with_c and any(c.lane == SM80_LANE for c in configs):
        raise ValueError("the sm80 lane's kernels take C at run time: no with-C units")
    templates = [
        (
            f"{function_name(c, dtype, activation, with_c)}.cu",
            SM80_TEMPLATE if c.lane == SM80_LANE else TEMPLATE,
            render_context(c, dtype, activation, with_c),
        )
        for c in configs
        for dtype in dtypes
    ]
    functions = {
        lane: [
            function_name(c, dtype, activation, with_c)
            for c in configs
            for dtype in dtypes
            if (c.lane == SM80_LANE) == (lane == "sm80")
        ]
        for lane in ("sm90", "sm80")
    }
    templates.append(_binding(name, GEMM_BINDING, functions))
    return gen_jinja_jit_spec(
        name, templates, extra_include_dirs=[INCLUDE_DIR, CSRC_DIR], use_cutlass=True
    )


def config_module_name(
    config: GemmConfig | Sm80Config, dtype: str, activation: str = "identity", with_c=False
) -> str:
    """``oasr_`` and the function it exports: ``oasr_gemm_swish_fp16_t128x128x64_c1x1_pp``."""
    return f"oasr_{function_name(config, dtype, activation, with_c)}"


def gen_config_module(
    config: GemmConfig | Sm80Config, dtype: str, activation: str = "identity", with_c=False
) -> JitSpec:
    """The module of one variant. ``with_c`` on an sm80 config names the kernel without it
    (that lane adds C at run time)."""
    return gen_gemm_module(
        config_module_name(config, dtype, activation, with_c),
        [config],
        dtypes=(dtype,),
        activation=activation,
        with_c=adds_c(config, with_c),
    )


def gen_production_modules(arch=None) -> list[JitSpec]:
    """The variants `oasr jit prebuild` builds for ``arch`` (default: the process's): every
    production config in each dtype and epilogue, and on sm_90 the kernels adding a matrix C
    (only the sm90 lane builds those)."""
    chosen = production_configs(_arch(arch))
    return [
        gen_config_module(config, dtype, act, with_c)
        for with_c in (False, True)
        for act in ACTIVATION_FUNCTORS
        for dtype in DTYPES
        for config in chosen
        if not with_c or adds_c(config, with_c)
    ]


def bmm_function_name(dtype: str, b_layout: str) -> str:
    """The exported function of bmm for one dtype and B layout: ``bmm_fp16_b_row`` (and
    ``bmm_fp16_b_row_lane``, the kernel a call would run)."""
    return f"bmm_{dtype}_{b_layout}"


def bmm_tuned_function_name(dtype: str, b_layout: str, config: GemmConfig) -> str:
    """The tuned-lane kernel of one config (a C++ symbol the launcher calls, not exported)."""
    return f"bmm_{dtype}_{b_layout}_{config.id}"


def gen_bmm_module(
    name: str = BMM_MODULE,
    dtypes=tuple(DTYPES),
    layouts=tuple(BMM_B_LAYOUTS),
    tuned: tuple[GemmConfig, ...] = BMM_TUNED,
) -> JitSpec:
    """Per (dtype, layout): the launcher unit (general lane) and one unit per tuned config."""
    templates = []
    functions = []
    for dtype in dtypes:
        for layout in layouts:
            base = {
                "dtype": dtype,
                "ctype": DTYPES[dtype],
                "b_layout": layout,
                "b_row_major": "true" if BMM_B_LAYOUTS[layout] else "false",
            }
            entries = []
            for config in tuned:
                function = bmm_tuned_function_name(dtype, layout, config)
                entries.append(
                    {"function": function, "id": config.id}
                    | {"tile_m": config.tile_m, "tile_n": config.tile_n}
                )
                templates.append(
                    (
                        f"{function}.cu",
                        BMM_SM90_TEMPLATE,
                        base
                        | render_context(config, dtype)
                        | {"function": function, "config_id": config.id},
                    )
                )
            function = bmm_function_name(dtype, layout)
            functions.append(function)
            templates.append(
                (f"{function}.cu", BMM_TEMPLATE, base | {"function": function, "tuned": entries})
            )
    templates.append(_binding(name, BMM_BINDING, {"functions": functions}))
    return gen_jinja_jit_spec(
        name, templates, extra_include_dirs=[INCLUDE_DIR, CSRC_DIR], use_cutlass=True
    )


def group_function_name(dtype: str) -> str:
    """The exported function of group_gemm: ``group_gemm_fp16``."""
    return f"group_gemm_{dtype}"


def gen_group_module(name: str = GROUP_MODULE, dtypes=tuple(DTYPES)) -> JitSpec:
    templates = [
        (
            f"{group_function_name(dtype)}.cu",
            GROUP_TEMPLATE,
            {"dtype": dtype, "ctype": DTYPES[dtype], "function": group_function_name(dtype)},
        )
        for dtype in dtypes
    ]
    functions = [group_function_name(dtype) for dtype in dtypes]
    templates.append(_binding(name, GROUP_BINDING, {"functions": functions}))
    return gen_jinja_jit_spec(
        name, templates, extra_include_dirs=[INCLUDE_DIR, CSRC_DIR], use_cutlass=True
    )


def gen_log_softmax_module() -> JitSpec:
    return gen_jit_spec(
        LOG_SOFTMAX_MODULE,
        [CSRC_DIR / "log_softmax_rows.cu", CSRC_DIR / "log_softmax_jit_binding.cu"],
        extra_include_dirs=[CSRC_DIR],
    )


def gen_head_module() -> JitSpec:
    return gen_jit_spec(
        HEAD_MODULE,
        [
            CSRC_DIR / "log_softmax_head_sm90.cu",
            CSRC_DIR / "log_softmax_cluster_sm90.cu",
            CSRC_DIR / "log_softmax_head_jit_binding.cu",
        ],
        extra_include_dirs=[INCLUDE_DIR],
    )


def _arch(arch=None):
    """``arch``, or the process's target architecture (`oasr_jit.target_arch`)."""
    if arch is None:
        from oasr_jit import target_arch

        return target_arch()
    return arch


def bmm_tuned_configs(arch=None) -> tuple[GemmConfig, ...]:
    """bmm's tuned lane on ``arch``: `BMM_TUNED` where the sm90 lane is built, else none (the
    launcher then runs the general lane, CUTLASS 2.x, for every call)."""
    return BMM_TUNED if LANE in lanes(_arch(arch)) else ()


def production_specs(arch) -> list[JitSpec]:
    """The modules `oasr jit prebuild` builds for ``arch``: the GEMM variants of the production
    configs (`gen_production_modules`), bmm's (its tuned lane on sm_90 only), group_gemm's,
    gemm_log_softmax's row pass, and on sm_90 its fused heads (TMA + wgmma)."""
    sm90 = LANE in lanes(arch)
    return [
        *gen_production_modules(arch),
        gen_bmm_module(tuned=bmm_tuned_configs(arch)),
        gen_group_module(),
        gen_log_softmax_module(),
        *([gen_head_module()] if sm90 else []),
    ]


@functools.cache
def bmm_module():
    return gen_bmm_module(tuned=bmm_tuned_configs()).build_and_load()


@functools.cache
def group_module():
    return gen_group_module().build_and_load()


@functools.cache
def log_softmax_module():
    return gen_log_softmax_module().build_and_load()


@functools.cache
def head_module():
    return gen_head_module().build_and_load()


@functools.cache
def config_module(
    config: GemmConfig | Sm80Config, dtype: str, activation: str = "identity", with_c=False
):
    return gen_config_module(config, dtype, activation, with_c).build_and_load()
