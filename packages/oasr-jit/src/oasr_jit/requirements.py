"""Which backends can serve a call: ``@supported_compute_capability`` and ``@backend_requirement``.

A check function takes the op's arguments and returns True or raises ``ValueError`` saying what
is wrong; ``@supported_compute_capability([80, 90])`` marks the architectures it can serve.
``@backend_requirement`` runs the checks before the op:

* a named backend must serve the call or raise (`BackendUnsupportedError`, naming the reason);
* ``backend="auto"`` keeps every backend whose checks pass, orders them with ``heuristic_func``
  and exposes the list as ``op.suitable_auto_backends`` (per thread) for the op body to use;
* ``skip_check=True`` skips all of it, for callers that proved their inputs.

The compute capability is that of the first CUDA tensor argument's device; calls without one
skip the capability test (their checks decide).
"""

from __future__ import annotations

import functools
import inspect
import sys
import threading
from collections.abc import Callable, Iterable, Mapping


class BackendUnsupportedError(ValueError):
    """The named backend (or every backend, for ``"auto"``) cannot serve this call."""


def supported_compute_capability(capabilities: Iterable[int]):
    """Mark a check function with the compute capabilities (e.g. ``[80, 90]``) it can serve."""
    supported = frozenset(int(c) for c in capabilities)

    def mark(check: Callable) -> Callable:
        check._supported_ccs = supported
        check.is_compute_capability_supported = lambda cc: int(cc) in supported
        return check

    return mark


def _capability_of_args(args, kwargs) -> int | None:
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    for value in (*args, *kwargs.values()):
        device = getattr(value, "device", None)
        if isinstance(value, torch.Tensor) and device is not None and device.type == "cuda":
            major, minor = torch.cuda.get_device_capability(device)
            return major * 10 + minor
    return None


def _supports(check: Callable | None, cc: int | None) -> bool:
    if check is None or cc is None:
        return True
    supported = getattr(check, "_supported_ccs", None)
    return supported is None or cc in supported


class _BackendRequirement:
    def __init__(self, func, backend_checks, common_check, heuristic_func):
        functools.update_wrapper(self, func)
        self._func = func
        self._checks: dict[str, Callable] = dict(backend_checks or {})
        self._common = common_check
        self._heuristic = heuristic_func
        self._signature = inspect.signature(func)
        self._local = threading.local()
        if self._checks and "backend" not in self._signature.parameters:
            raise TypeError(f"{func.__name__} has backend checks but no `backend` parameter")

    # -- queries ------------------------------------------------------------------------------

    def has_backend(self, backend: str) -> bool:
        return backend in self._checks

    def has_backend_choices(self) -> bool:
        return len(self._checks) > 1

    def is_backend_supported(self, backend: str, cc: int | None = None) -> bool:
        check = self._checks.get(backend)
        if check is None:
            return False
        return cc is None or (_supports(check, cc) and _supports(self._common, cc))

    def is_compute_capability_supported(self, cc: int) -> bool:
        if not self._checks:
            return _supports(self._common, cc)
        return any(self.is_backend_supported(b, cc) for b in self._checks)

    @property
    def suitable_auto_backends(self) -> list[str]:
        """The backends that passed their checks in this thread's current ``"auto"`` call."""
        return getattr(self._local, "suitable", [])

    # -- the call -----------------------------------------------------------------------------

    def _run_check(self, check, cc, args, kwargs, what: str) -> None:
        if not _supports(check, cc):
            supported = ", ".join(f"sm_{c}" for c in sorted(check._supported_ccs))
            raise BackendUnsupportedError(
                f"{self.__name__}: {what} does not support sm_{cc} (supported: {supported})"
            )
        if check(*args, **kwargs) is not True:
            raise BackendUnsupportedError(f"{self.__name__}: {what} rejected this call")

    def __call__(self, *args, skip_check: bool = False, **kwargs):
        if skip_check:
            return self._func(*args, **kwargs)
        cc = _capability_of_args(args, kwargs)
        if self._common is not None:
            self._run_check(self._common, cc, args, kwargs, "this op")
        if not self._checks:
            return self._func(*args, **kwargs)
        bound = self._signature.bind(*args, **kwargs)
        bound.apply_defaults()
        backend = bound.arguments["backend"]
        if backend in (None, "auto"):
            suitable, reasons = [], []
            for name, check in self._checks.items():
                try:
                    self._run_check(check, cc, args, kwargs, f"backend '{name}'")
                    suitable.append(name)
                except ValueError as exc:
                    reasons.append(str(exc))
            if not suitable:
                raise BackendUnsupportedError(
                    f"{self.__name__}: no backend can serve this call:\n  " + "\n  ".join(reasons)
                )
            if self._heuristic is not None:
                suitable = list(self._heuristic(suitable, *args, **kwargs))
                if not suitable:
                    raise BackendUnsupportedError(
                        f"{self.__name__}: the backend heuristic accepted none of the suitable "
                        "backends"
                    )
            self._local.suitable = suitable
            try:
                return self._func(*args, **kwargs)
            finally:
                self._local.suitable = []
        if backend not in self._checks:
            known = ", ".join(sorted(self._checks))
            raise ValueError(f"{self.__name__}: unknown backend {backend!r} (known: {known})")
        self._run_check(self._checks[backend], cc, args, kwargs, f"backend '{backend}'")
        return self._func(*args, **kwargs)


def backend_requirement(
    backend_checks: Mapping[str, Callable] | None = None,
    common_check: Callable | None = None,
    heuristic_func: Callable | None = None,
):
    """Run ``common_check`` and the chosen backend's check before the op (see module doc)."""

    def wrap(func):
        return _BackendRequirement(func, backend_checks, common_check, heuristic_func)

    return wrap
