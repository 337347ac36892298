"""Errors of the JIT core."""

from __future__ import annotations

import re

_ERROR_LINE = re.compile(r"(\berror\b|\bfatal\b|undefined reference|Error \d)", re.IGNORECASE)


def first_error_line(output: str) -> str:
    """The compiler's first line that reports an error (else the first non-empty line)."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    for line in lines:
        if line.startswith(("FAILED:", "ninja:")):
            continue
        if _ERROR_LINE.search(line):
            return line
    return lines[0] if lines else "(the compiler printed nothing)"


class JitBuildError(RuntimeError):
    """A module failed to compile or link.

    ``command`` is the failing compiler/linker command, ``output`` what the tools printed. The
    message leads with the compiler's first error line. A failed key is remembered: the same
    process raises this again without rebuilding until `oasr_jit.forget_failed_builds()`.
    """

    def __init__(self, module: str, key: str, command: str, output: str, hint: str = ""):
        self.module = module
        self.key = key
        self.command = command
        self.output = output
        self.hint = hint
        first = first_error_line(output)
        parts = [
            f"JIT build of module '{module}' failed: {first}",
            f"  key: {key}",
            f"  command: {command}" if command else "",
            "  compiler output:",
            "\n".join(f"    {line}" for line in output.rstrip().splitlines()),
        ]
        if hint:
            parts.append(f"  hint: {hint}")
        super().__init__("\n".join(p for p in parts if p))

    def again(self) -> JitBuildError:
        """A fresh instance for a repeated failure (no traceback or notes of the first call)."""
        return JitBuildError(self.module, self.key, self.command, self.output, self.hint)


class JitBuildLockTimeout(RuntimeError):
    """Another process held a module's build lock for longer than the lock timeout.

    Not a build failure and not remembered: the next call waits again. Raise the limit with
    ``OASR_JIT_LOCK_TIMEOUT`` (seconds) or find the holder this message names.
    """


class VariantUnsupportedError(RuntimeError):
    """A kernel variant cannot implement a problem; raised before anything is launched so the
    caller may choose another variant."""
