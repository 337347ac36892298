"""``@oasr_api``: debug logging of public calls, and exception context naming the op.

``OASR_LOG_LEVEL`` (read at import; `set_log_level` changes it later):

* ``0`` / unset: nothing is logged; the decorator costs one Python call frame.
* ``1``: each call's op name.
* ``2``: the op name and every argument (tensors as shape, dtype, device, strides).

Whatever the level, an exception escaping a decorated op keeps its type and gains a note
(PEP 678) naming the op and its arguments, so a ``ValueError`` deep in a model says which call
raised it and with what. A build that an op's first call starts names the op in its progress
line (`calling_op`, which reads the call stack only when asked: the decorator costs nothing
for it).
"""

from __future__ import annotations

import functools
import inspect
import logging
import os
import sys

log = logging.getLogger("oasr")

_level = 0


def _parse_level(raw: str) -> int:
    names = {"": 0, "off": 0, "info": 1, "debug": 2}
    if raw.strip().lower() in names:
        return names[raw.strip().lower()]
    try:
        return max(0, int(raw))
    except ValueError:
        raise ValueError(
            f"OASR_LOG_LEVEL must be 0, 1, 2 (or off/info/debug), got {raw!r}"
        ) from None


def set_log_level(level: int | str) -> None:
    """Change the call-logging level at run time (see module docstring)."""
    global _level
    _level = _parse_level(str(level))
    if _level and not log.handlers and not logging.getLogger().handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("[oasr] %(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.DEBUG)


set_log_level(os.environ.get("OASR_LOG_LEVEL", "0"))


def describe(value) -> str:
    """A short description of an argument; tensors by metadata only (never their values)."""
    shape = getattr(value, "shape", None)
    dtype = getattr(value, "dtype", None)
    if shape is not None and dtype is not None:
        text = f"Tensor{list(shape)} {str(dtype).replace('torch.', '')}"
        device = getattr(value, "device", None)
        if device is not None:
            text += f" {device}"
        stride = getattr(value, "stride", None)
        if callable(stride):
            try:
                text += f" stride={tuple(stride())}"
            except Exception:
                pass
        return text
    if isinstance(value, (list, tuple)) and len(value) > 4:
        return f"{type(value).__name__}(len={len(value)})"
    if isinstance(value, (list, tuple)):
        inner = ", ".join(describe(v) for v in value)
        return f"[{inner}]" if isinstance(value, list) else f"({inner})"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _describe_call(signature, name: str, args, kwargs) -> str:
    try:
        bound = signature.bind_partial(*args, **kwargs)
        parts = [f"{k}={describe(v)}" for k, v in bound.arguments.items()]
    except TypeError:
        parts = [describe(a) for a in args] + [f"{k}={describe(v)}" for k, v in kwargs.items()]
    return f"{name}({', '.join(parts)})"


def oasr_api(func):
    """Decorate a public op: log calls at ``OASR_LOG_LEVEL`` >= 1, and name the op and its
    arguments in any exception it raises."""
    signature = inspect.signature(func)
    name = f"oasr.{func.__name__}"

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        if _level:
            if _level >= 2:
                log.debug("%s", _describe_call(signature, name, args, kwargs))
            else:
                log.debug("%s", name)
        try:
            return func(*args, **kwargs)
        except Exception as exc:
            if hasattr(exc, "add_note") and not getattr(exc, "_oasr_noted", False):
                exc.add_note(f"in {_describe_call(signature, name, args, kwargs)}")
                try:
                    exc._oasr_noted = True  # when ops nest, the innermost names the call
                except AttributeError:
                    pass
            raise

    return wrapper


_WRAPPER_CODE = oasr_api(lambda: None).__code__


def _dtypes(args, kwargs) -> list[str]:
    """The distinct dtypes of the tensor arguments, in order (``["float16"]``)."""
    seen = []
    for value in [*(args or ()), *(kwargs or {}).values()]:
        dtype = getattr(value, "dtype", None)
        if dtype is not None and getattr(value, "shape", None) is not None:
            text = str(dtype).replace("torch.", "")
            if text not in seen:
                seen.append(text)
    return seen


def calling_op(*, with_dtypes: bool = False) -> str | None:
    """The outermost ``@oasr_api`` op on the calling thread's stack (``"oasr.gemm"``), or None;
    ``with_dtypes``: followed by its tensor arguments' dtypes (``"oasr.gemm (bfloat16)"``).
    Walks the frames; meant for rare events such as a build, not for every call."""
    found = None
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code is _WRAPPER_CODE:
            name = frame.f_locals.get("name")
            if name is not None:
                found = name
                if with_dtypes:
                    dtypes = _dtypes(frame.f_locals.get("args"), frame.f_locals.get("kwargs"))
                    if dtypes:
                        found += f" ({', '.join(dtypes)})"
        frame = frame.f_back
    return found
