"""JIT generators of the decoder family.

    oasr_decoder_ctc_cpu   host C++: CTC greedy search, prefix beam search (batch and
                           streaming), context graphs; needs neither CUDA nor a GPU nor an
                           architecture
    oasr_decoder_topk      CUDA: sorted top-k of rows (vocabulary-sized)
    oasr_decoder_ctc_cuda  CUDA: batched greedy and prefix beam search, streaming state on the
                           device

``-O3`` (over the core's ``-O2``): GCC 12 vectorizes the per-frame scans over V (the NaN check,
the block maxima of the token ranking, the greedy argmax) only at -O3; beam search at V 5000,
T 750, beam 10 went from 13 to 9.8 ms per utterance. No fast-math: results are IEEE-exact.
``-ffp-contract=off`` (host) and ``--fmad=false`` (CUDA): no multiply-add is fused, so the score
arithmetic of include/oasr/decoder/log_math.h gives the same bits on the CPU and the GPU.
"""

from __future__ import annotations

import functools
from pathlib import Path

from oasr_jit import JitSpec, gen_jit_spec

PACKAGE_DIR = Path(__file__).resolve().parent
INCLUDE_DIR = PACKAGE_DIR / "include"
CSRC_DIR = PACKAGE_DIR / "csrc"


def gen_ctc_cpu_module() -> JitSpec:
    return gen_jit_spec(
        "oasr_decoder_ctc_cpu",
        [CSRC_DIR / "ctc_cpu.cc", CSRC_DIR / "ctc_cpu_jit_binding.cc"],
        extra_cflags=["-O3", "-ffp-contract=off"],
        extra_include_dirs=[INCLUDE_DIR],
    )


def gen_topk_module() -> JitSpec:
    return gen_jit_spec(
        "oasr_decoder_topk",
        [CSRC_DIR / "topk.cu", CSRC_DIR / "topk_jit_binding.cu"],
        extra_include_dirs=[INCLUDE_DIR, CSRC_DIR],
    )


def gen_ctc_cuda_module() -> JitSpec:
    return gen_jit_spec(
        "oasr_decoder_ctc_cuda",
        [CSRC_DIR / "ctc_cuda.cu", CSRC_DIR / "ctc_cuda_jit_binding.cu"],
        extra_cuda_cflags=["--fmad=false"],  # log_math.h: the same bits as the CPU decoder
        extra_include_dirs=[INCLUDE_DIR, CSRC_DIR],
    )


def production_specs(arch=None) -> list[JitSpec]:
    """Every module of the family (the host module is the same for every architecture)."""
    return [gen_ctc_cpu_module(), gen_topk_module(), gen_ctc_cuda_module()]


#: The module's exports (csrc/ctc_cpu_jit_binding.cc).
FUNCTIONS = (
    "ctc_greedy_search",
    "ctc_prefix_beam_search",
    "context_graph_create",
    "context_graph_score",
    "context_graph_info",
    "ctc_stream_create",
    "ctc_stream_accept",
    "ctc_stream_result",
    "ctc_stream_reset",
    "ctc_stream_num_frames",
)


@functools.cache
def topk_module():
    """The loaded oasr_decoder_topk module (built on first use)."""
    return gen_topk_module().build_and_load()


@functools.cache
def ctc_cuda_module():
    """The loaded oasr_decoder_ctc_cuda module (built on first use)."""
    return gen_ctc_cuda_module().build_and_load()


@functools.cache
def module():
    """The loaded oasr_decoder_ctc_cpu module (built on first use).

    TVM-FFI releases the GIL around a call when the function's ``release_gil`` is set, which is
    the default unless ``TVM_FFI_RELEASE_GIL_BY_DEFAULT=0``; the decoders rely on it (a batch
    decodes on several threads at once), so it is set here whatever the environment says.
    ``Module.__getattr__`` caches each function object, so the setting sticks.
    """
    mod = gen_ctc_cpu_module().build_and_load()
    for name in FUNCTIONS:
        getattr(mod, name).release_gil = True
    return mod
