"""The compilers: which nvcc and host C++ compiler a build runs, and their identities.

A tool's identity is its ``--version`` text; it goes into every cache key. Asking costs 2-3 ms
per tool, a large share of a warm load, so the answer of a compiler *binary* is remembered on disk
keyed by its resolved path, size, mtime and inode: replacing or upgrading it changes that stat.
A script (a wrapper) is asked every time: what it runs can change without its own stat changing.

nvcc found on PATH may be a wrapper script (``/usr/local/bin/nvcc`` on our machines). Its real
toolkit is asked of nvcc itself (its dry run prints ``TOP=<root>``), never guessed from the path,
and builds then run ``<root>/bin/nvcc``. The dry run costs ~15 ms, so its answer is memoised on
disk per wrapper (path, size, mtime) and re-asked when the wrapper's ``--version`` stops matching
the remembered toolkit's.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import NamedTuple

from . import env

_ROOT_MEMO_FILE = ".nvcc-toolkit-roots.json"
_VERSION_MEMO_FILE = ".tool-versions.json"


def _run(argv: list[str]) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise RuntimeError(f"could not run `{' '.join(argv)}`: {exc}") from exc


def _read_memo(name: str) -> dict:
    try:
        return json.loads((env.jit_dir() / name).read_text())
    except (OSError, ValueError):
        return {}


def _write_memo(name: str, memo: dict) -> None:
    store = env.jit_dir() / name
    try:
        store.parent.mkdir(parents=True, exist_ok=True)
        tmp = store.with_name(f"{store.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(memo, indent=1, sort_keys=True))
        os.replace(tmp, store)
    except OSError:
        pass  # a read-only cache root costs only the memo


def _binary_signature(path: str) -> str | None:
    """``realpath:size:mtime:inode`` of an ELF executable; None for scripts and the unreadable."""
    real = os.path.realpath(path)
    try:
        with open(real, "rb") as f:
            if f.read(4) != b"\x7fELF":
                return None
            st = os.fstat(f.fileno())
    except OSError:
        return None
    return f"{real}:{st.st_size}:{st.st_mtime_ns}:{st.st_ino}"


@functools.cache
def tool_version(path: str) -> str:
    """``<path> --version``, whitespace-normalised (memoised per binary, see module doc)."""
    signature = _binary_signature(path)
    if signature is not None:
        known = _read_memo(_VERSION_MEMO_FILE).get(signature)
        if known is not None:
            return known
    proc = _run([path, "--version"])
    if proc.returncode != 0:
        raise RuntimeError(
            f"`{path} --version` failed with exit code {proc.returncode}: {proc.stderr.strip()}"
        )
    version = "\n".join(line.rstrip() for line in proc.stdout.strip().splitlines())
    if signature is not None:
        memo = _read_memo(_VERSION_MEMO_FILE)
        memo[signature] = version
        _write_memo(_VERSION_MEMO_FILE, memo)
    return version


# ---------------------------------------------------------------------------------------------
# host compiler


class HostCompiler(NamedTuple):
    path: str  # CXX (or `c++`) resolved through PATH; links are not followed (they select tools)
    identity: str


def host_compiler() -> HostCompiler:
    """The host C++ compiler: ``$CXX``, else ``c++`` on PATH."""
    configured = os.environ.get("CXX", "").strip()
    if configured:
        words = shlex.split(configured)
        if len(words) != 1:
            raise ValueError(
                f"CXX must name one compiler executable, got {configured!r}; put flags in "
                "OASR_EXTRA_CFLAGS"
            )
        name, origin = words[0], "CXX"
    else:
        name, origin = "c++", "PATH"
    found = shutil.which(name)
    if found is None:
        raise RuntimeError(f"host C++ compiler {name!r} (from {origin}) not found; set CXX")
    path = str(Path(found).absolute())
    return HostCompiler(path=path, identity=tool_version(path))


# ---------------------------------------------------------------------------------------------
# nvcc


class Nvcc(NamedTuple):
    path: str  # the nvcc builds run
    source: str  # OASR_NVCC / CUDA_HOME / CUDA_PATH / PATH (+ the wrapper it was found behind)
    toolkit_root: Path
    identity: str
    release: str  # e.g. "13.0"


def _toolkit_root_by_dryrun(nvcc_path: str) -> Path:
    proc = _run([nvcc_path, "-dryrun", "-x", "cu", "-E", os.devnull])
    match = re.search(r"^#\$ TOP=(.+)$", proc.stdout + proc.stderr, re.MULTILINE)
    if match is None:
        raise RuntimeError(
            f"`{nvcc_path} -dryrun` printed no TOP= line, so its CUDA toolkit is unknown; "
            "set CUDA_HOME to the toolkit root"
        )
    return Path(match.group(1).strip()).resolve()


def _remembered_toolkit_root(wrapper: str) -> Path:
    st = os.stat(wrapper)
    signature = f"{wrapper}:{st.st_size}:{st.st_mtime_ns}:{st.st_ino}"
    memo = _read_memo(_ROOT_MEMO_FILE)
    remembered = memo.get(signature)
    if remembered is not None:
        root = Path(remembered)
        real = root / "bin" / "nvcc"
        if real.is_file() and tool_version(str(real)) == tool_version(wrapper):
            return root
    root = _toolkit_root_by_dryrun(wrapper)
    memo[signature] = str(root)
    _write_memo(_ROOT_MEMO_FILE, memo)
    return root


def _locate_nvcc() -> tuple[str, str, Path]:
    """(nvcc to run, where it came from, toolkit root)."""
    if os.environ.get("OASR_NVCC", "").strip():
        raw = os.environ["OASR_NVCC"].strip()
        found = shutil.which(raw)
        if found is None:
            raise RuntimeError(f"OASR_NVCC={raw} is not an executable; fix or unset OASR_NVCC")
        path = str(Path(found).absolute())
        return path, "OASR_NVCC", _remembered_toolkit_root(path)
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var, "").strip():
            root = Path(os.environ[var].strip()).expanduser().absolute()
            candidate = root / "bin" / "nvcc"
            if not os.access(candidate, os.X_OK):
                raise RuntimeError(f"{var}={root} has no bin/nvcc; point {var} at a CUDA toolkit")
            return str(candidate), var, root.resolve()
    found = shutil.which("nvcc")
    if found is None:
        raise RuntimeError(
            "nvcc not found: install the CUDA toolkit, or set CUDA_HOME (the toolkit root) or "
            "OASR_NVCC (the compiler)"
        )
    wrapper = str(Path(found).absolute())
    root = _remembered_toolkit_root(wrapper)
    real = root / "bin" / "nvcc"
    if not os.access(real, os.X_OK):
        raise RuntimeError(f"nvcc at {wrapper} reports toolkit {root}, which has no bin/nvcc")
    source = "PATH" if str(real) == wrapper else f"PATH ({wrapper} -> {real})"
    return str(real), source, root


def nvcc() -> Nvcc:
    """The CUDA compiler: ``$OASR_NVCC``, else ``$CUDA_HOME/bin/nvcc`` (or ``CUDA_PATH``), else
    the toolkit behind ``nvcc`` on PATH."""
    path, source, root = _locate_nvcc()
    identity = tool_version(path)
    match = re.search(r"release (\d+\.\d+)", identity)
    return Nvcc(
        path=path,
        source=source,
        toolkit_root=root,
        identity=identity,
        release=match.group(1) if match else "unknown",
    )


# ---------------------------------------------------------------------------------------------
# what nvcc can build for

_GPU_CODE_MEMO_FILE = ".nvcc-gpu-codes.json"


@functools.cache
def nvcc_gpu_codes(path: str) -> tuple[str, ...] | None:
    """The real architectures ``<path> --list-gpu-code`` names (``sm_75``, ``sm_80``, ...), in
    its order; None when nvcc cannot say (a toolkit older than the option). Asked once per
    binary: the answer is remembered on disk like its ``--version``."""
    signature = _binary_signature(path)
    if signature is not None:
        known = _read_memo(_GPU_CODE_MEMO_FILE).get(signature)
        if known is not None:
            return tuple(known)
    try:
        proc = _run([path, "--list-gpu-code"])
    except RuntimeError:
        return None
    codes = tuple(re.findall(r"\bsm_\d+\b", proc.stdout)) if proc.returncode == 0 else ()
    if not codes:
        return None
    if signature is not None:
        memo = _read_memo(_GPU_CODE_MEMO_FILE)
        memo[signature] = list(codes)
        _write_memo(_GPU_CODE_MEMO_FILE, memo)
    return codes


def buildable_arches(compiler: Nvcc) -> list | None:
    """The architectures ``compiler`` builds, oldest first, as `arch.CudaArch` (``9.0a`` for
    ``sm_90``: the ``a`` target is built from 9.0 on); None when it cannot say."""
    from .arch import parse_arch

    codes = nvcc_gpu_codes(compiler.path)
    if codes is None:
        return None
    arches = []
    for code in codes:
        try:
            parsed = parse_arch(code)
        except ValueError:
            continue  # older than OASR builds
        if parsed not in arches:
            arches.append(parsed)
    return sorted(arches)


def arch_unsupported_reason(compiler: Nvcc, target) -> str | None:
    """Why ``compiler`` cannot build for ``target`` (a `CudaArch`), in one line naming the fix;
    None when it can (or cannot say)."""
    arches = buildable_arches(compiler)
    if arches is None or any(a[:2] == target[:2] for a in arches):
        return None
    names = ", ".join(a.name for a in arches)
    return (
        f"CUDA {compiler.release} ({compiler.path}) cannot build for {target.sm}; it builds "
        f"{names}: choose one of those (--arch or OASR_CUDA_ARCH_LIST), or use a CUDA toolkit "
        f"that supports {target.sm} (CUDA_HOME or OASR_NVCC)"
    )


def check_arch_buildable(compiler: Nvcc, target) -> None:
    """Raise `RuntimeError` (`arch_unsupported_reason`) unless ``compiler`` builds ``target``."""
    reason = arch_unsupported_reason(compiler, target)
    if reason is not None:
        raise RuntimeError(reason)
