"""The one CUDA architecture this process compiles for, and the GPUs the driver reports.

A process compiles every CUDA module for one architecture: ``OASR_CUDA_ARCH_LIST`` (e.g.
``9.0a``; compiling needs no GPU), else the current device's. Compute capability 9.0 and above
build the architecture-specific ``a`` target (wgmma, setmaxnreg). The choice is made on first use
and then frozen: a process that meets a device of another architecture raises
(`require_device_family`) instead of loading a library built for the wrong one.

GPUs are queried through the CUDA driver (``libcuda.so.1``) with ctypes, so neither torch nor the
toolkit is needed to ask.
"""

from __future__ import annotations

import os
import re
import sys
import threading
from typing import NamedTuple


class CudaArch(NamedTuple):
    major: int
    minor: int

    @property
    def suffix(self) -> str:
        # Hopper and later: build the arch-specific target, which wgmma/tcgen05 need.
        return "a" if self.major >= 9 else ""

    @property
    def name(self) -> str:
        """``9.0a``: the form ``OASR_CUDA_ARCH_LIST`` takes."""
        return f"{self.major}.{self.minor}{self.suffix}"

    @property
    def sm(self) -> str:
        """``sm_90a``."""
        return f"sm_{self.major}{self.minor}{self.suffix}"

    @property
    def family(self) -> str:
        """``sm90``: the tuning-data / module-family tag (no suffix)."""
        return f"sm{self.major}{self.minor}"

    @property
    def capability(self) -> int:
        """90 for 9.0: the integer `supported_compute_capability` lists."""
        return self.major * 10 + self.minor

    def gencode_flags(self) -> list[str]:
        code = f"{self.major}{self.minor}{self.suffix}"
        return [f"-gencode=arch=compute_{code},code=sm_{code}"]

    def __str__(self) -> str:
        return self.name


_ARCH_RE = re.compile(r"^(?:sm_?|compute_)?(\d+)(?:\.(\d))?([af]?)$")


def parse_arch(text: str) -> CudaArch:
    """Accepts ``9.0a``, ``9.0``, ``90``, ``90a``, ``sm_90a``."""
    match = _ARCH_RE.match(text.strip().lower())
    if match is None:
        raise ValueError(f"not a CUDA architecture: {text!r} (expected e.g. '9.0a' or '8.0')")
    digits, minor, _ = match.groups()
    if minor is None:
        if len(digits) < 2:
            raise ValueError(f"not a CUDA architecture: {text!r} (expected e.g. '9.0a' or '8.0')")
        major, minor_value = int(digits[:-1]), int(digits[-1])
    else:
        major, minor_value = int(digits), int(minor)
    if major < 7:
        raise ValueError(
            f"CUDA architecture {text!r} is older than sm_70, which OASR does not build"
        )
    return CudaArch(major, minor_value)


# ---------------------------------------------------------------------------------------------
# the driver


class GpuInfo(NamedTuple):
    index: int
    name: str
    arch: CudaArch
    num_sms: int


class DriverInfo(NamedTuple):
    version: str  # CUDA driver API version, e.g. "13.0"
    gpus: tuple[GpuInfo, ...]


_CU_ATTR_MULTIPROCESSOR_COUNT = 16
_CU_ATTR_CC_MAJOR = 75
_CU_ATTR_CC_MINOR = 76

_driver_lock = threading.Lock()
_driver_info: DriverInfo | str | None = "unknown"


def driver_info() -> DriverInfo | None:
    """The CUDA driver's version and visible GPUs, or ``None`` with no driver or no GPU."""
    global _driver_info
    with _driver_lock:
        if _driver_info == "unknown":
            _driver_info = _query_driver()
        return _driver_info  # type: ignore[return-value]


def _query_driver() -> DriverInfo | None:
    import ctypes

    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None

    def check(status: int) -> bool:
        return status == 0

    if not check(cuda.cuInit(0)):
        return None
    version = ctypes.c_int()
    if not check(cuda.cuDriverGetVersion(ctypes.byref(version))):
        return None
    count = ctypes.c_int()
    if not check(cuda.cuDeviceGetCount(ctypes.byref(count))):
        return None
    gpus = []
    for index in range(count.value):
        device = ctypes.c_int()
        if not check(cuda.cuDeviceGet(ctypes.byref(device), index)):
            continue
        name = ctypes.create_string_buffer(256)
        cuda.cuDeviceGetName(name, 256, device)
        attrs = {}
        for attr in (_CU_ATTR_CC_MAJOR, _CU_ATTR_CC_MINOR, _CU_ATTR_MULTIPROCESSOR_COUNT):
            value = ctypes.c_int()
            cuda.cuDeviceGetAttribute(ctypes.byref(value), attr, device)
            attrs[attr] = value.value
        gpus.append(
            GpuInfo(
                index=index,
                name=name.value.decode(errors="replace"),
                arch=CudaArch(attrs[_CU_ATTR_CC_MAJOR], attrs[_CU_ATTR_CC_MINOR]),
                num_sms=attrs[_CU_ATTR_MULTIPROCESSOR_COUNT],
            )
        )
    return DriverInfo(
        version=f"{version.value // 1000}.{version.value % 1000 // 10}", gpus=tuple(gpus)
    )


def _device_capability(device) -> CudaArch:
    """Capability of a torch device / index; torch is used only if the caller already has it."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        if device is None:
            device = torch.cuda.current_device()
        major, minor = torch.cuda.get_device_capability(device)
        return CudaArch(major, minor)
    info = driver_info()
    index = 0 if device is None else int(getattr(device, "index", device) or 0)
    if info is None or index >= len(info.gpus):
        raise RuntimeError(
            "no CUDA GPU is visible, so the target architecture is unknown; set "
            "OASR_CUDA_ARCH_LIST (e.g. OASR_CUDA_ARCH_LIST=9.0a for Hopper) to compile without one"
        )
    return info.gpus[index].arch


# ---------------------------------------------------------------------------------------------
# the process's architecture

_target_lock = threading.Lock()
_target: CudaArch | None = None
_target_origin = ""


def _arch_from_env() -> CudaArch | None:
    raw = os.environ.get("OASR_CUDA_ARCH_LIST", "").strip()
    if not raw:
        return None
    entries = {parse_arch(item) for item in re.split(r"[\s,;]+", raw) if item}
    if len(entries) != 1:
        names = ", ".join(sorted(a.name for a in entries))
        raise ValueError(
            f"OASR_CUDA_ARCH_LIST={raw!r} names {len(entries)} architectures ({names}); OASR "
            "compiles for one architecture per process: run one process per architecture"
        )
    return entries.pop()


def target_arch() -> CudaArch:
    """The architecture this process compiles CUDA modules for (frozen at first use)."""
    global _target, _target_origin
    with _target_lock:
        from_env = _arch_from_env()
        if _target is None:
            _target = from_env if from_env is not None else _device_capability(None)
            _target_origin = "OASR_CUDA_ARCH_LIST" if from_env is not None else "current device"
        elif from_env is not None and from_env != _target:
            raise RuntimeError(
                f"this process already compiles for {_target.sm} (from {_target_origin}); "
                f"OASR_CUDA_ARCH_LIST now says {from_env.sm}. One architecture per process: "
                "set OASR_CUDA_ARCH_LIST before the first build"
            )
        return _target


def require_device_family(device=None) -> CudaArch:
    """Raise unless ``device`` (a torch device or index; default: the current one) has the
    architecture this process compiles for; returns that architecture."""
    want = target_arch()
    have = _device_capability(device)
    if have != want:
        raise RuntimeError(
            f"device {device if device is not None else '(current)'} is {have.sm}, but this "
            f"process compiles for {want.sm} (from {_target_origin}). Use one process per GPU "
            "architecture and select its GPUs with CUDA_VISIBLE_DEVICES"
        )
    return want


def _reset_for_tests() -> None:
    global _target, _target_origin
    with _target_lock:
        _target, _target_origin = None, ""
