"""Helpers of the JIT core's tests (imported by name: `import jit_helpers`; conftest.py holds only
fixtures, because every package's tests share one pytest run and one `conftest` module name)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"

HOST_SOURCE = textwrap.dedent(
    """
    #include <tvm/ffi/function.h>
    int64_t add_one(int64_t x) { return x + ADDEND; }
    TVM_FFI_DLL_EXPORT_TYPED_FUNC(add_one, add_one);
    """
)


def has_nvcc() -> bool:
    try:
        from oasr_jit import toolchain

        toolchain.nvcc()
        return True
    except Exception:
        return False


requires_nvcc = pytest.mark.skipif(not has_nvcc(), reason="needs nvcc (the CUDA toolkit)")


class CountingCompiler:
    """A CXX wrapper script that logs each compile (`-c`) to a file, optionally sleeping first."""

    def __init__(self, directory: Path, real: str, version_suffix: str = ""):
        self.path = directory / "counting-c++"
        self.log = directory / "compiles.log"
        self.sleep_file = directory / "sleep_s"
        script = f"""#!/bin/sh
if [ "$1" = "--version" ]; then
  {real} --version; [ -n "{version_suffix}" ] && echo "{version_suffix}"; exit 0
fi
for arg in "$@"; do
  if [ "$arg" = "-c" ]; then
    echo "$$" >> "{self.log}"
    [ -f "{self.sleep_file}" ] && sleep "$(cat "{self.sleep_file}")"
    break
  fi
done
exec {real} "$@"
"""
        self.path.write_text(script)
        self.path.chmod(self.path.stat().st_mode | stat.S_IEXEC)

    @property
    def compiles(self) -> int:
        return len(self.log.read_text().splitlines()) if self.log.exists() else 0

    def slow_down(self, seconds: float | None) -> None:
        if seconds is None:
            self.sleep_file.unlink(missing_ok=True)
        else:
            self.sleep_file.write_text(str(seconds))


def run_python(code: str, *, env: dict | None = None, timeout: float = 300, check: bool = True):
    """Run ``code`` in a fresh interpreter with this environment (plus ``env``)."""
    full_env = dict(os.environ, **(env or {}))
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=full_env,
    )
    if check and proc.returncode != 0:
        raise AssertionError(
            f"subprocess failed ({proc.returncode}):\n"
            f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
        )
    return proc


def fake_nvcc(directory: Path, codes: tuple[str, ...] = ("sm_75", "sm_80", "sm_90")) -> Path:
    """An nvcc stand-in (for ``OASR_NVCC``) that answers ``--version``, ``--list-gpu-code`` (with
    ``codes``) and the toolkit dry run, and fails any compile."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "nvcc"
    listing = "\\n".join(codes)
    path.write_text(
        f"""#!/bin/sh
case "$1" in
  --version) echo "Cuda compilation tools, release 12.9, V12.9.0" ;;
  --list-gpu-code) printf '{listing}\\n' ;;
  -dryrun) echo "#\\$ TOP={directory}" >&2 ;;
  *) echo "fake nvcc: compiling is not supported" >&2; exit 1 ;;
esac
"""
    )
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path
