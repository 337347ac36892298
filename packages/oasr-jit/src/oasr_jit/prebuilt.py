"""Prebuilt kernels: cache packages (``oasr-jit-cache-sm90``) that ship built modules, and the
loader that takes a module from one before compiling it.

A cache package is a wheel holding one Python package (``oasr_jit_cache_sm90/``) with
``manifest.json`` and ``lib/<module>.so``, registered in the entry-point group
``oasr.jit_cache``. `write_wheel` makes one from modules built in the local cache (``oasr jit
prebuild --wheel DIR``); `load` is what `JitSpec.build_and_load` asks first.

The validity rule. An artifact is loaded only when its *prebuilt key* equals the spec's: a hash
of the key format, the architecture, the TVM-FFI version, the CUTLASS release (``use_cutlass``
specs), the sources, every hashed header and the whole build (every flag), with the compilers
as placeholders. So the compilers' paths and versions may differ (computing the key needs no
compiler), nothing else may. A CUDA artifact also needs a driver that supports the CUDA
release it was built with (driver version >= that release), and its library must match the
manifest's size and sha256 and load. Whatever fails, the module is built locally and the
reason is printed once per module and process.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import io
import json
import os
import sys
import sysconfig
import threading
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

ENTRY_POINT_GROUP = "oasr.jit_cache"
#: The manifest's layout; a package of another format is not read.
MANIFEST_FORMAT = 1
#: ``OASR_JIT_PREBUILT=off`` (or 0): never load from a cache package.
ENV_SWITCH = "OASR_JIT_PREBUILT"

# The inputs a prebuilt key covers, in the order a mismatch is reported.
INPUT_FIELDS = ("format", "arch", "tvm_ffi", "cutlass", "sources", "headers", "flags")


def _digest(value) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()


def _key_of(name: str, inputs: dict) -> str:
    from .core import KEY_LENGTH

    return _digest({"name": name, **inputs})[:KEY_LENGTH]


def spec_inputs(spec) -> dict:
    """What a prebuilt artifact of ``spec`` must have been built from (see the module doc)."""
    plan = spec.portable_plan()
    manifest = plan.manifest
    return {
        "format": manifest["format"],
        "arch": plan.arch.sm if plan.arch is not None else None,
        "tvm_ffi": manifest["tools"]["tvm_ffi"],
        "cutlass": manifest["tools"].get("cutlass"),
        "sources": _digest(manifest["sources"]),
        "headers": _digest(manifest["headers"]),
        "flags": _digest(manifest["ninja"]),
    }


def prebuilt_key(spec) -> str:
    """The key an artifact of ``spec`` is matched on (no compiler needed to compute it)."""
    return _key_of(spec.name, spec_inputs(spec))


# ---------------------------------------------------------------------------------------------
# installed cache packages


class CachePackage(NamedTuple):
    distribution: str  # "oasr-jit-cache-sm90"
    version: str
    root: Path  # the package directory (manifest.json, lib/)
    modules: dict  # module name -> manifest entry

    @property
    def label(self) -> str:
        return f"{self.distribution} {self.version}"


class Artifact(NamedTuple):
    package: CachePackage
    name: str
    entry: dict

    @property
    def path(self) -> Path:
        return self.package.root / self.entry["file"]


def _enabled() -> bool:
    return os.environ.get(ENV_SWITCH, "").strip().lower() not in ("0", "off", "no", "false")


@functools.cache
def installed_packages() -> tuple[CachePackage, ...]:
    """Every cache package registered in ``oasr.jit_cache`` whose manifest reads (found without
    importing it); a package that does not read is reported once and skipped."""
    import importlib.util
    from importlib.metadata import entry_points

    found = []
    for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        dist = getattr(ep, "dist", None)
        label = f"{dist.name} {dist.version}" if dist is not None else ep.value
        try:
            module_spec = importlib.util.find_spec(ep.value)
            if module_spec is None or not module_spec.submodule_search_locations:
                raise ValueError(f"package {ep.value} not found")
            root = Path(next(iter(module_spec.submodule_search_locations)))
            manifest = json.loads((root / "manifest.json").read_text())
            if manifest.get("manifest_format") != MANIFEST_FORMAT:
                raise ValueError(
                    f"manifest format {manifest.get('manifest_format')!r}, this oasr-jit reads "
                    f"{MANIFEST_FORMAT}"
                )
            modules = dict(manifest["modules"])
        except (OSError, ValueError, KeyError, TypeError, ImportError) as exc:
            _report(f"package:{label}", f"cache package {label} is unreadable ({exc}); ignored")
            continue
        found.append(
            CachePackage(
                distribution=manifest.get("distribution", dist.name if dist else ep.value),
                version=manifest.get("version", dist.version if dist else "?"),
                root=root,
                modules=modules,
            )
        )
    return tuple(found)


def _reset_for_tests() -> None:
    installed_packages.cache_clear()
    with _lock:
        _reported.clear()
        _verdicts.clear()


# ---------------------------------------------------------------------------------------------
# matching


_lock = threading.Lock()
_reported: set[str] = set()
#: spec identity (name, prebuilt key) -> the artifact to load, or None (build locally)
_verdicts: dict[tuple[str, str], Artifact | None] = {}


def _report(token: str, message: str) -> None:
    """``message`` on stderr, once per ``token`` and process."""
    with _lock:
        if token in _reported:
            return
        _reported.add(token)
    print(f"oasr-jit: {message}", file=sys.stderr, flush=True)


def _mismatch(entry: dict, name: str, want: dict) -> str:
    """Why an artifact's manifest entry does not match the spec (``want``: `spec_inputs`)."""
    have = entry.get("inputs")
    if not isinstance(have, dict) or _key_of(name, have) != entry.get("key"):
        return "has a manifest entry whose key does not match its inputs (a damaged manifest)"
    for field in INPUT_FIELDS:
        if have.get(field) == want.get(field):
            continue
        if field == "format":
            return f"was built with oasr-jit key format {have.get(field)} (this one: {want[field]})"
        if field == "arch":
            if want[field] is None:
                return f"was built for {have.get(field)} (this module is host code)"
            return f"was built for {have.get(field)} (this process builds for {want[field]})"
        if field == "tvm_ffi":
            return f"was built against TVM-FFI {have.get(field)} (installed: {want[field]})"
        if field == "cutlass":
            return f"was built with CUTLASS {have.get(field)} (installed: {want[field]})"
        return {
            "sources": "was built for other sources",
            "headers": "was built for other headers",
        }.get(field, "was built with other flags")
    return "was built for other inputs"


def _driver_cuda_version() -> tuple[int, int] | None:
    """The CUDA version the driver supports (``cuDriverGetVersion``), None without a driver."""
    import ctypes

    try:
        cuda = ctypes.CDLL("libcuda.so.1")
        version = ctypes.c_int()
        if cuda.cuDriverGetVersion(ctypes.byref(version)) != 0:
            return None
    except (OSError, AttributeError):
        return None
    return version.value // 1000, version.value % 1000 // 10


def _version_tuple(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(p) for p in str(text).split(".")[:2])
    except ValueError:
        return ()


def _file_problem(artifact: Artifact) -> str | None:
    from .elf import is_complete_shared_object

    path, entry = artifact.path, artifact.entry
    try:
        size = path.stat().st_size
    except OSError:
        return f"has no library at {path}"
    if size != entry.get("size") or not is_complete_shared_object(path):
        return (
            f"has a damaged library ({path}: {size} bytes, the manifest says {entry.get('size')})"
        )
    sha = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            sha.update(block)
    if sha.hexdigest() != entry.get("sha256"):
        return f"has a damaged library ({path} does not match the manifest's sha256)"
    return None


def _driver_problem(entry: dict) -> str | None:
    built = entry.get("cuda")
    if entry.get("inputs", {}).get("arch") is None or not built:
        return None  # host code
    driver = _driver_cuda_version()
    if driver is None:
        return f"was built with CUDA {built} and no CUDA driver is present"
    if driver < _version_tuple(built):
        return (
            f"was built with CUDA {built}, newer than this driver supports "
            f"(CUDA {driver[0]}.{driver[1]}): update the driver"
        )
    return None


def find(spec) -> Artifact | None:
    """The installed artifact ``spec`` may load, or None (after reporting, once, why a shipped
    artifact of that name cannot be used)."""
    if not _enabled():
        return None
    packages = [p for p in installed_packages() if spec.name in p.modules]
    if not packages:
        return None
    try:
        want = spec_inputs(spec)
    except (RuntimeError, ValueError, OSError) as exc:
        _report(
            f"inputs:{spec.name}", f"prebuilt {spec.name} not checked ({exc}); building locally"
        )
        return None
    key = _key_of(spec.name, want)
    with _lock:
        if (spec.name, key) in _verdicts:
            return _verdicts[(spec.name, key)]
    chosen, reasons = None, []
    for package in packages:
        artifact = Artifact(package, spec.name, package.modules[spec.name])
        inputs = artifact.entry.get("inputs")
        if (
            artifact.entry.get("key") != key
            or not isinstance(inputs, dict)
            or _key_of(spec.name, inputs) != key
        ):
            reasons.append((package, _mismatch(artifact.entry, spec.name, want)))
            continue
        problem = _driver_problem(artifact.entry) or _file_problem(artifact)
        if problem is not None:
            reasons.append((package, problem))
            continue
        chosen = artifact
        break
    if chosen is None:
        for package, reason in reasons[:1]:
            _report(
                f"module:{spec.name}:{key}",
                f"prebuilt {spec.name} in {package.label} {reason}; building locally",
            )
    with _lock:
        _verdicts[(spec.name, key)] = chosen
    return chosen


def load(spec):
    """The ``tvm_ffi.Module`` of ``spec``'s matching prebuilt artifact, or None (build it)."""
    artifact = find(spec)
    if artifact is None:
        return None
    from .core import _loaded, _state_lock

    memo = f"prebuilt:{artifact.entry['key']}:{spec.name}"
    with _state_lock:
        module = _loaded.get(memo)
    if module is not None:
        return module
    import tvm_ffi

    try:
        module = tvm_ffi.load_module(str(artifact.path))
    except Exception as exc:  # a library that does not load: build it here instead
        with _lock:
            _verdicts[(spec.name, artifact.entry["key"])] = None
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        _report(
            f"load:{spec.name}",
            f"prebuilt {spec.name} in {artifact.package.label} does not load ({first}); "
            "building locally",
        )
        return None
    with _state_lock:
        return _loaded.setdefault(memo, module)


def source_of(spec) -> str | None:
    """``"oasr-jit-cache-sm90 0.1.0"`` when ``spec`` would load from that package, else None."""
    artifact = find(spec)
    return artifact.package.label if artifact is not None else None


# ---------------------------------------------------------------------------------------------
# writing a cache package


def distribution_name(arch) -> str:
    """``oasr-jit-cache-sm90`` for 9.0a."""
    return f"oasr-jit-cache-{arch.family}"


def _platform_tag() -> str:
    return sysconfig.get_platform().replace("-", "_").replace(".", "_")


def _record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"sha256={digest}"


def manifest_entry(spec) -> dict:
    """What the manifest says about ``spec``'s module, built in the local cache."""
    lib = spec.lib_path
    data = lib.read_bytes()
    plan = spec.plan()
    inputs = spec_inputs(spec)
    entry = {
        "key": _key_of(spec.name, inputs),
        "local_key": spec.key,
        "file": f"lib/{spec.name}.so",
        "size": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
        "inputs": inputs,
        "cuda": plan.nvcc.release if plan.nvcc is not None else None,
        "cxx": plan.cxx.identity.splitlines()[0] if plan.cxx.identity else plan.cxx.path,
    }
    return entry


def write_wheel(specs: Sequence, out_dir: Path, *, arch, version: str | None = None) -> Path:
    """Package the built modules of ``specs`` (each must be built: `JitSpec.build`) as the
    wheel ``oasr_jit_cache_<family>-<version>-py3-none-<platform>.whl`` in ``out_dir``;
    returns its path. ``version``: the wheel's (default: oasr-jit's)."""
    from . import __version__
    from .elf import is_complete_shared_object

    version = version or __version__
    dist = distribution_name(arch)
    package = dist.replace("-", "_")
    names = [s.name for s in specs]
    if len(set(names)) != len(names):
        raise ValueError(f"two specs of one name in a cache package: {sorted(names)}")
    files: list[tuple[str, bytes]] = []
    modules = {}
    for spec in specs:
        if not is_complete_shared_object(spec.lib_path):
            raise RuntimeError(f"{spec.name} is not built ({spec.lib_path}): build it first")
        entry = manifest_entry(spec)
        modules[spec.name] = entry
        files.append((f"{package}/{entry['file']}", spec.lib_path.read_bytes()))
    manifest = {
        "manifest_format": MANIFEST_FORMAT,
        "distribution": dist,
        "version": version,
        "arch": arch.sm,
        "modules": dict(sorted(modules.items())),
    }
    init = (
        f'"""Prebuilt OASR JIT modules for {arch.sm} ({len(modules)}); oasr-jit loads them '
        'through the entry-point group oasr.jit_cache (see manifest.json)."""\n'
    )
    files.insert(0, (f"{package}/__init__.py", init.encode()))
    files.insert(1, (f"{package}/manifest.json", json.dumps(manifest, indent=1).encode()))
    info = f"{package}-{version}.dist-info"
    tag = f"py3-none-{_platform_tag()}"
    metadata = (
        "Metadata-Version: 2.1\n"
        f"Name: {dist}\n"
        f"Version: {version}\n"
        f"Summary: Prebuilt OASR JIT modules for {arch.sm}\n"
        "Requires-Python: >=3.10\n"
    )
    wheel = (
        f"Wheel-Version: 1.0\nGenerator: oasr-jit {__version__}\nRoot-Is-Purelib: false\n"
        f"Tag: {tag}\n"
    )
    entry_points = f"[{ENTRY_POINT_GROUP}]\n{arch.family} = {package}\n"
    files += [
        (f"{info}/METADATA", metadata.encode()),
        (f"{info}/WHEEL", wheel.encode()),
        (f"{info}/entry_points.txt", entry_points.encode()),
    ]
    record = io.StringIO()
    for name, data in files:
        record.write(f"{name},{_record_hash(data)},{len(data)}\n")
    record.write(f"{info}/RECORD,,\n")
    files.append((f"{info}/RECORD", record.getvalue().encode()))

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{package}-{version}-{tag}.whl"
    tmp = path.with_name(path.name + ".partial")
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, data in files:
            zinfo = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
            zinfo.external_attr = (0o755 if name.endswith(".so") else 0o644) << 16
            zinfo.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(zinfo, data)
    os.replace(tmp, path)
    return path
