"""The core's self-test module: a few small kernels over the shared headers.

`oasr doctor --selftest`, ``nox -s demo`` and the core's GPU tests build and call it; it proves
the toolchain, the arch flags, the shared headers and the launcher conventions end to end.
"""

from __future__ import annotations

from . import env
from .core import JitSpec, gen_jit_spec


def gen_selftest_module() -> JitSpec:
    return gen_jit_spec(
        "oasr_jit_selftest",
        [env.OASR_JIT_CSRC_DIR / "selftest.cu", env.OASR_JIT_CSRC_DIR / "selftest_jit_binding.cu"],
    )
