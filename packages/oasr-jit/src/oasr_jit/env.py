"""Where things are: the cache directory, the core's own device sources, TVM-FFI and CUTLASS.

Nothing here imports torch or ``tvm_ffi`` (importing ``tvm_ffi`` imports torch): TVM-FFI is
located through its distribution metadata, so ``oasr jit ...`` stays light.
"""

from __future__ import annotations

import importlib.util
import os
import re
from pathlib import Path
from typing import NamedTuple

PACKAGE_DIR = Path(__file__).resolve().parent
#: The core's shared device headers (``oasr/common/*.h``), used by every family.
OASR_JIT_INCLUDE_DIR = PACKAGE_DIR / "include"
#: The core's launcher-side helpers (``tvm_ffi_utils.h``) and its self-test module.
OASR_JIT_CSRC_DIR = PACKAGE_DIR / "csrc"

#: Environment variables that change what or how the core builds (or, OASR_TUNE_USER_DB, what it
#: selects); `oasr doctor` prints them.
ENV_VARS = (
    "OASR_JIT_DIR",
    "OASR_CUDA_ARCH_LIST",
    "OASR_NVCC",
    "CUDA_HOME",
    "CUDA_PATH",
    "CXX",
    "OASR_CUTLASS_DIR",
    "OASR_EXTRA_CFLAGS",
    "OASR_EXTRA_CUDAFLAGS",
    "OASR_EXTRA_LDFLAGS",
    "OASR_JIT_LOCK_TIMEOUT",
    "MAX_JOBS",
    "OASR_LOG_LEVEL",
    "OASR_TUNE_USER_DB",
)


def jit_dir() -> Path:
    """The JIT cache root: ``$OASR_JIT_DIR``, else ``~/.cache/oasr/jit``."""
    configured = os.environ.get("OASR_JIT_DIR")
    if configured:
        return Path(configured).expanduser().resolve()
    return Path.home() / ".cache" / "oasr" / "jit"


def lock_timeout_s() -> float:
    """How long a build waits for another process's build of the same key (default 600 s)."""
    raw = os.environ.get("OASR_JIT_LOCK_TIMEOUT", "600")
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(
            f"OASR_JIT_LOCK_TIMEOUT must be a number of seconds, got {raw!r}"
        ) from None
    if value <= 0:
        raise ValueError(f"OASR_JIT_LOCK_TIMEOUT must be positive, got {raw!r}")
    return value


def env_flags(var: str) -> list[str]:
    """Flags from an ``OASR_EXTRA_*FLAGS`` variable, split like a shell would split them."""
    import shlex

    return shlex.split(os.environ.get(var, ""))


# ---------------------------------------------------------------------------------------------
# TVM-FFI


class TvmFfiInfo(NamedTuple):
    version: str
    root: Path  # the installed ``tvm_ffi`` package directory

    @property
    def include_dirs(self) -> list[Path]:
        # dlpack's headers ship inside the same include/ tree in the wheel.
        return [self.root / "include"]

    @property
    def lib_dir(self) -> Path:
        return self.root / "lib"


def tvm_ffi_info() -> TvmFfiInfo:
    """Locate the installed TVM-FFI (headers, ``libtvm_ffi.so``, version) without importing it."""
    spec = importlib.util.find_spec("tvm_ffi")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(
            "apache-tvm-ffi is not installed; install it with `pip install apache-tvm-ffi`"
        )
    root = Path(next(iter(spec.submodule_search_locations))).resolve()
    # The generated _version.py is read instead of the distribution metadata: a metadata scan of
    # a large site-packages costs milliseconds on every warm load.
    match = None
    version_file = root / "_version.py"
    if version_file.is_file():
        match = re.search(
            r"__version__\s*=\s*(?:version\s*=\s*)?['\"]([^'\"]+)", version_file.read_text()
        )
    if match is not None:
        version = match.group(1)
    else:
        from importlib.metadata import version as distribution_version

        version = distribution_version("apache-tvm-ffi")
    if not (root / "include" / "tvm" / "ffi" / "function.h").is_file():
        raise RuntimeError(f"TVM-FFI at {root} has no C++ headers (include/tvm/ffi/function.h)")
    return TvmFfiInfo(version=version, root=root)


# ---------------------------------------------------------------------------------------------
# CUTLASS


class CutlassInfo(NamedTuple):
    version: str  # "4.2.0", read from cutlass/version.h
    source: str  # where it came from: OASR_CUTLASS_DIR / oasr-cutlass / nvidia-cutlass wheel
    include_dirs: tuple[Path, ...]


def _cutlass_version(include_dir: Path) -> str:
    text = (include_dir / "cutlass" / "version.h").read_text()
    parts = []
    for field in ("MAJOR", "MINOR", "PATCH"):
        match = re.search(rf"#define\s+CUTLASS_{field}\s+(\d+)", text)
        if match is None:
            raise RuntimeError(f"{include_dir}/cutlass/version.h has no CUTLASS_{field}")
        parts.append(match.group(1))
    return ".".join(parts)


def _cutlass_from_checkout(root: Path, source: str) -> CutlassInfo | None:
    include = root / "include"
    if not (include / "cutlass" / "version.h").is_file():
        return None
    dirs = [include]
    if (root / "tools" / "util" / "include").is_dir():
        dirs.append(root / "tools" / "util" / "include")
    return CutlassInfo(_cutlass_version(include), source, tuple(d.resolve() for d in dirs))


def cutlass_info() -> CutlassInfo | None:
    """CUTLASS headers: ``$OASR_CUTLASS_DIR``, else the ``oasr-cutlass`` package, else the
    ``nvidia-cutlass`` wheel (``cutlass_library/source``). ``None`` when none is present.

    Each gives ``include/`` then ``tools/util/include/``, and the version from
    ``cutlass/version.h``, so the same release keys the same whichever source holds it."""
    override = os.environ.get("OASR_CUTLASS_DIR")
    if override:
        info = _cutlass_from_checkout(Path(override).expanduser(), "OASR_CUTLASS_DIR")
        if info is None:
            raise RuntimeError(
                f"OASR_CUTLASS_DIR={override} is not a CUTLASS checkout (no "
                "include/cutlass/version.h under it): point it at one, or unset it to use the "
                "oasr-cutlass package"
            )
        return info
    if importlib.util.find_spec("oasr_cutlass") is not None:
        import oasr_cutlass  # a few lines, no dependencies

        dirs = oasr_cutlass.include_dirs()  # RuntimeError naming the fix when it is broken
        version = _cutlass_version(dirs[0])
        return CutlassInfo(version, "oasr-cutlass", tuple(d.resolve() for d in dirs))
    spec = importlib.util.find_spec("cutlass_library")
    if spec is not None and spec.submodule_search_locations:
        source_root = Path(next(iter(spec.submodule_search_locations))) / "source"
        info = _cutlass_from_checkout(source_root, "nvidia-cutlass wheel")
        if info is not None:
            return info
    return None


#: how to get CUTLASS's headers
CUTLASS_FIX = (
    "`pip install oasr-cutlass` (from a checkout: `pip install ./packages/oasr-cutlass`), or "
    "point OASR_CUTLASS_DIR at a CUTLASS checkout"
)


def require_cutlass() -> CutlassInfo:
    """`cutlass_info`, or `RuntimeError` naming the fix when there is none."""
    info = cutlass_info()
    if info is None:
        raise RuntimeError(f"CUTLASS headers not found: {CUTLASS_FIX}")
    return info


# ---------------------------------------------------------------------------------------------
# torch (described, never imported: importing it costs a second)


class TorchInfo(NamedTuple):
    version: str  # "2.13.0+cu130"
    cuda: str | None  # the CUDA release it was built with ("13.0"); None: a CPU (or ROCm) build
    hip: str | None  # the ROCm release of a ROCm build
    root: Path


def torch_info() -> TorchInfo | None:
    """The installed torch's version and build (``torch/version.py``, read without importing
    torch); None when torch is not installed."""
    import ast

    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return None
    root = Path(next(iter(spec.submodule_search_locations))).resolve()
    values: dict[str, object] = {}
    try:
        tree = ast.parse((root / "version.py").read_text())
    except (OSError, SyntaxError, ValueError):
        tree = ast.Module(body=[], type_ignores=[])
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        else:
            continue
        if isinstance(target, ast.Name) and isinstance(value, ast.Constant):
            values[target.id] = value.value
    version = values.get("__version__")
    if not isinstance(version, str):
        from importlib.metadata import PackageNotFoundError
        from importlib.metadata import version as distribution_version

        try:
            version = distribution_version("torch")
        except PackageNotFoundError:
            version = "unknown"
    cuda, hip = values.get("cuda"), values.get("hip")
    return TorchInfo(
        version=version,
        cuda=cuda if isinstance(cuda, str) else None,
        hip=hip if isinstance(hip, str) else None,
        root=root,
    )
