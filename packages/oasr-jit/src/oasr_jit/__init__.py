"""oasr-jit: the shared JIT core of OASR.

Specs (`gen_jit_spec`, `gen_jinja_jit_spec`) compile CUDA or host C++ sources into a cached,
locked, content-keyed library that TVM-FFI loads. Importing this package imports neither torch
nor TVM-FFI, and each submodule only on first use of one of its names: a warm load pays only for
what it touches.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

# public name -> submodule that defines it
_EXPORTS = {
    "CudaArch": "arch",
    "parse_arch": "arch",
    "require_device_family": "arch",
    "target_arch": "arch",
    "JitSpec": "core",
    "SourceFile": "core",
    "forget_failed_builds": "core",
    "gen_jinja_jit_spec": "core",
    "gen_jit_spec": "core",
    "render_template": "core",
    "clear_cache": "cache",
    "check_tensor": "checks",
    "is_complete_shared_object": "elf",
    "JitBuildError": "errors",
    "JitBuildLockTimeout": "errors",
    "VariantUnsupportedError": "errors",
    "Family": "families",
    "discover_families": "families",
    "UnsupportedArchitectureError": "families",
    "oasr_api": "api_logging",
    "backend_requirement": "requirements",
    "supported_compute_capability": "requirements",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    submodule = _EXPORTS.get(name)
    if submodule is None:
        raise AttributeError(f"module 'oasr_jit' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{submodule}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
