"""Test helpers every family shares: the GPU skip, per-dtype tolerances, output poisoning.

Imports torch and pytest: use it from tests only.
"""

from __future__ import annotations

import pytest
import torch

#: (rtol, atol) per dtype for results computed in float and rounded once to the output dtype.
#: Families loosen these per op with a comment saying why.
TOLERANCES = {
    torch.float32: (1e-5, 1e-5),
    torch.float16: (1e-3, 1e-3),
    torch.bfloat16: (8e-3, 8e-3),
}


def gpu_capability() -> int | None:
    """Compute capability of the current GPU as an int (90), or None without one."""
    if not torch.cuda.is_available():
        return None
    major, minor = torch.cuda.get_device_capability()
    return major * 10 + minor


def skip_unless_gpu(min_capability: int | None = None, reason: str = ""):
    """The one capability skip: ``@skip_unless_gpu(90, "wgmma")`` on a test or a class."""
    cc = gpu_capability()
    if cc is None:
        return pytest.mark.skip(reason="needs a CUDA GPU")
    if min_capability is not None and cc < min_capability:
        why = f" for {reason}" if reason else ""
        return pytest.mark.skip(reason=f"needs sm_{min_capability}+{why}, this GPU is sm_{cc}")
    return pytest.mark.gpu


def poison_(tensor: torch.Tensor) -> torch.Tensor:
    """Fill an output with a value no kernel produces by accident (NaN, or the integer minimum),
    so an element the kernel never wrote fails the comparison."""
    if tensor.is_floating_point():
        return tensor.fill_(float("nan"))
    if tensor.dtype == torch.bool:
        return tensor.fill_(True)
    return tensor.fill_(torch.iinfo(tensor.dtype).min)


def poisoned(shape, *, dtype, device="cuda") -> torch.Tensor:
    return poison_(torch.empty(shape, dtype=dtype, device=device))


def assert_close(actual: torch.Tensor, expected: torch.Tensor, dtype=None, **overrides) -> None:
    """``torch.testing.assert_close`` at the dtype's (rtol, atol) unless overridden."""
    rtol, atol = TOLERANCES[dtype or actual.dtype]
    torch.testing.assert_close(
        actual, expected, rtol=overrides.get("rtol", rtol), atol=overrides.get("atol", atol)
    )


def compile_units_for_arches(spec, arches, out_dir, units=None) -> dict[str, float]:
    """Compile-only check of a module's CUDA units for several architectures (no GPU, no link):
    each unit is compiled once to an object file holding one cubin per architecture (one nvcc
    run: the host pass is shared), with the flags the spec's own build uses for the process's
    architecture. A unit that reads ``OASR_TARGET_SM`` (a per-architecture constant) compiles
    once per architecture instead. ``units``: the source names to compile (default: every CUDA
    unit but the bindings). Returns unit -> seconds; AssertionError with nvcc's output when a
    unit fails or an object lacks an architecture's cubin. Units run side by side, ``MAX_JOBS``
    at a time."""
    import os
    import re
    import subprocess
    import time
    from concurrent.futures import ThreadPoolExecutor
    from pathlib import Path

    from .arch import parse_arch

    arches = [parse_arch(a) if isinstance(a, str) else a for a in arches]
    plan = spec.plan()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)

    def expand(flag: str) -> str:
        for placeholder, path in plan.roots.paths.items():
            flag = flag.replace(f"${{{placeholder}}}", str(path))
        return flag

    per_arch_flags = ("-gencode", "-DOASR_TARGET_SM=")
    flags = [expand(f) for f in plan.cuda_cflags if not f.startswith(per_arch_flags)]
    chosen = [
        src
        for src in spec.sources
        if src.is_cuda
        and (src.name in units if units is not None else "_jit_binding" not in src.name)
    ]
    if units is not None and len(chosen) != len(units):
        raise ValueError(
            f"{spec.name} has no CUDA units {sorted(set(units) - {s.name for s in chosen})}"
        )
    jobs = []  # (unit, its file, the architectures of one nvcc run)
    for src in chosen:
        path = src.path
        if path is None:  # rendered: written beside its objects (quoted includes come by -I)
            path = out_dir / src.name
            path.write_bytes(src.content())
        groups = [[a] for a in arches] if b"OASR_TARGET_SM" in src.content() else [arches]
        jobs += [(src.name, path, group) for group in groups]

    def run(job) -> tuple[str, float]:
        name, path, group = job
        obj = out_dir / f"{name}.{'_'.join(a.sm for a in group)}.o"
        gencode = [flag for a in group for flag in a.gencode_flags()]
        command = [plan.nvcc.path, *flags, *gencode, f"-DOASR_TARGET_SM={group[0].capability}"]
        start = time.monotonic()
        # --resource-usage: ptxas names each kernel it compiles and for which architecture,
        # the proof that every architecture's device code was generated (no cuobjdump needed)
        proc = subprocess.run([*command, "--resource-usage", "-c", str(path), "-o", str(obj)],
                              capture_output=True, text=True)  # fmt: skip
        seconds = time.monotonic() - start
        assert proc.returncode == 0, f"{spec.name}/{name} for {group}:\n{proc.stderr[-6000:]}"
        found = set(re.findall(r"for '(sm_\d+a?)'", proc.stdout + proc.stderr))
        missing = [a.sm for a in group if a.sm not in found]
        assert not missing, f"{spec.name}/{name}: ptxas compiled no kernel for {missing}"
        return name, seconds

    workers = max(1, int(os.environ.get("MAX_JOBS") or os.cpu_count() or 1))
    seconds: dict[str, float] = {}
    with ThreadPoolExecutor(min(workers, len(jobs) or 1)) as pool:
        for name, took in pool.map(run, jobs):
            seconds[name] = seconds.get(name, 0.0) + took
    return seconds
