"""JIT specs: what a module is made of, its cache key, and the locked build-then-load.

A `JitSpec` names a module and its sources (files on disk, or Jinja-rendered text held in
memory). Its key covers what is compiled, how, and with which tools; see `JitSpec.key`. The
library lives at ``$OASR_JIT_DIR/<name>/<key>/<name>.so``:

    <name>.so          the library, renamed into place only after a complete link
    <name>.so.partial  the link output while a build runs (never loaded)
    <name>.so.failed   the last failed build's command and output (for processes that waited)
    <name>.lock        the build lock; it names its holder while held
    last_used          touched by every load (prune policy)
    build.ninja obj/   the build (kept: a rerun after an interrupted build compiles only the
                       objects it had not finished), gen/ the rendered sources, spec.json what
                       the key covers
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import shlex
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

from . import arch as _arch
from . import env, toolchain
from .elf import is_complete_shared_object
from .errors import JitBuildError
from .families import require_module_arch
from .lock import BuildLock

#: Bumped whenever the cache layout or the key's recipe changes.
KEY_FORMAT = 1
KEY_LENGTH = 20

CUDA_SUFFIXES = (".cu",)
HOST_SUFFIXES = (".cc", ".cpp", ".cxx")
# Everything a compiler can #include from an include dir; hashed by relative path and content.
HEADER_SUFFIXES = (".h", ".hh", ".hpp", ".hxx", ".cuh", ".inc", ".inl", ".ipp", ".tcc")
INCLUDED_SUFFIXES = HEADER_SUFFIXES + CUDA_SUFFIXES + HOST_SUFFIXES

_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

# -DNDEBUG: CUTLASS/CuTe device asserts otherwise become calls inside mainloops (ptxas then
# serialises wgmma across the call, warning C7510). Hidden visibility keeps template statics of
# two modules from merging into one STB_GNU_UNIQUE symbol; TVM-FFI exports are marked default.
DEFAULT_CFLAGS = ("-std=c++17", "-O2", "-fPIC", "-fvisibility=hidden", "-DNDEBUG")
DEFAULT_CUDA_CFLAGS = (
    "-std=c++17",
    "-O3",
    "-DNDEBUG",
    "-Xcompiler=-fPIC",
    "-Xcompiler=-fvisibility=hidden",
    "--expt-relaxed-constexpr",
    "--expt-extended-lambda",
)


# ---------------------------------------------------------------------------------------------
# sources


class SourceFile(NamedTuple):
    """One translation unit: a file on disk (``path``) or rendered text (``text``)."""

    name: str
    path: Path | None = None
    text: str | None = None

    @property
    def is_cuda(self) -> bool:
        return self.name.endswith(CUDA_SUFFIXES)

    def content(self) -> bytes:
        if self.text is not None:
            return self.text.encode()
        return self.path.read_bytes()


def _as_source(item) -> SourceFile:
    if isinstance(item, SourceFile):
        return item
    path = Path(item).expanduser().resolve()
    if not path.is_file():
        raise FileNotFoundError(f"JIT source {item} does not exist")
    return SourceFile(name=path.name, path=path)


def _check_sources(name: str, sources: Sequence[SourceFile]) -> None:
    if not sources:
        raise ValueError(f"JIT module '{name}' has no sources")
    seen = set()
    for src in sources:
        if not src.name.endswith(CUDA_SUFFIXES + HOST_SUFFIXES):
            raise ValueError(
                f"JIT source {src.name} of module '{name}' must be CUDA (.cu) or host C++ "
                f"({', '.join(HOST_SUFFIXES)})"
            )
        if src.name in seen:
            raise ValueError(f"JIT module '{name}' has two sources named {src.name}")
        seen.add(src.name)


# ---------------------------------------------------------------------------------------------
# header hashing (memoised per directory on its stat signature)

_header_memo: dict[str, tuple[tuple, list]] = {}
_header_memo_lock = threading.Lock()


def _hash_headers(root: Path, recursive: bool) -> list[tuple[str, str]]:
    """``[(relative path, sha256)]`` of every includable file under ``root``."""
    entries = []
    if recursive:
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
            for fname in filenames:
                if fname.endswith(INCLUDED_SUFFIXES):
                    entries.append(Path(dirpath, fname))
    else:
        entries = [p for p in root.iterdir() if p.is_file() and p.name.endswith(HEADER_SUFFIXES)]
    stats = []
    for path in entries:
        st = path.stat()
        stats.append((str(path.relative_to(root)), st.st_size, st.st_mtime_ns, st.st_ino))
    stats.sort()
    signature = tuple(stats)
    memo_key = f"{root}|{recursive}"
    with _header_memo_lock:
        cached = _header_memo.get(memo_key)
        if cached is not None and cached[0] == signature:
            return cached[1]
    hashed = [(rel, hashlib.sha256((root / rel).read_bytes()).hexdigest()) for rel, *_ in stats]
    with _header_memo_lock:
        _header_memo[memo_key] = (signature, hashed)
    return hashed


# ---------------------------------------------------------------------------------------------
# ninja file rendering: one function, called with placeholders (for the key) or real paths


def _ninja_escape_path(path: str) -> str:
    return path.replace("$", "$$").replace(" ", "$ ").replace(":", "$:")


def _ninja_escape_arg(arg: str) -> str:
    return shlex.quote(arg).replace("$", "$$")


class _Roots:
    """Directories whose location must not enter the key: placeholder name -> real path."""

    def __init__(self):
        self.paths: dict[str, Path] = {}

    def add(self, placeholder: str, path: Path) -> str:
        self.paths[placeholder] = path
        return placeholder


# ---------------------------------------------------------------------------------------------
# in-process state

_failed: dict[str, JitBuildError] = {}
_loaded: dict[str, object] = {}
_state_lock = threading.Lock()


def forget_failed_builds() -> int:
    """Re-arm builds that failed in this process (after fixing the cause); returns how many."""
    with _state_lock:
        count = len(_failed)
        _failed.clear()
    return count


# ---------------------------------------------------------------------------------------------
# the spec


class JitSpec:
    """A JIT module: sources + flags -> ``<name>.so`` in the cache, loaded with TVM-FFI."""

    def __init__(
        self,
        name: str,
        sources: Sequence[SourceFile],
        *,
        extra_cflags: Sequence[str] = (),
        extra_cuda_cflags: Sequence[str] = (),
        extra_ldflags: Sequence[str] = (),
        extra_include_dirs: Sequence[Path] = (),
        use_cutlass: bool = False,
    ):
        if not isinstance(name, str) or not _NAME_RE.match(name):
            raise ValueError(
                f"JIT module name must be an identifier ([A-Za-z_][A-Za-z0-9_]*), got {name!r}"
            )
        _check_sources(name, sources)
        self.name = name
        self.sources = tuple(sources)
        self.extra_cflags = tuple(str(f) for f in extra_cflags)
        self.extra_cuda_cflags = tuple(str(f) for f in extra_cuda_cflags)
        self.extra_ldflags = tuple(str(f) for f in extra_ldflags)
        self.extra_include_dirs = tuple(Path(d).expanduser().resolve() for d in extra_include_dirs)
        for d in self.extra_include_dirs:
            if not d.is_dir():
                raise FileNotFoundError(f"include dir {d} of JIT module '{name}' does not exist")
        self.use_cutlass = use_cutlass
        self.is_cuda = any(src.is_cuda for src in self.sources)
        self._plan_lock = threading.Lock()
        self._plan: _BuildPlan | None = None
        self._portable_plan: _BuildPlan | None = None

    def __repr__(self) -> str:
        kind = "cuda" if self.is_cuda else "host"
        return f"JitSpec({self.name!r}, {kind}, {len(self.sources)} sources)"

    # -- key --------------------------------------------------------------------------------

    def plan(self) -> _BuildPlan:
        """The resolved build (tools, flags, key); computed once per spec object."""
        with self._plan_lock:
            if self._plan is None:
                self._plan = _BuildPlan(self)
            return self._plan

    def portable_plan(self) -> _BuildPlan:
        """The build with the compilers as placeholders (``${CXX}``, ``${NVCC}``): what a
        prebuilt artifact is matched on (`oasr_jit.prebuilt`). Needs no compiler."""
        with self._plan_lock:
            if self._portable_plan is None:
                self._portable_plan = _BuildPlan(self, portable=True)
            return self._portable_plan

    @property
    def key(self) -> str:
        """Hash of what is compiled (sources, headers, CUTLASS stamp), how (the compile and link
        commands with every flag, roots replaced by placeholders) and with which tools (nvcc,
        host compiler, TVM-FFI versions)."""
        return self.plan().key

    @property
    def key_dir(self) -> Path:
        return env.jit_dir() / self.name / self.key

    @property
    def lib_path(self) -> Path:
        return self.key_dir / f"{self.name}.so"

    @property
    def is_built(self) -> bool:
        return is_complete_shared_object(self.lib_path)

    # -- build --------------------------------------------------------------------------------

    def build(self) -> Path:
        """Compile (if not cached) without loading; needs no GPU. Returns the library path."""
        plan = self.plan()
        with _state_lock:
            failure = _failed.get(plan.key)
        if failure is not None:
            raise failure.again()
        if not is_complete_shared_object(self.lib_path):
            plan.build_locked()
        return self.lib_path

    def build_and_load(self):
        """Load the matching prebuilt artifact of an installed cache package (`oasr_jit.prebuilt`),
        else compile if needed and load; the ``tvm_ffi.Module`` (one per key and process)."""
        from . import prebuilt

        shipped = prebuilt.load(self)
        if shipped is not None:
            return shipped
        key = self.key
        with _state_lock:
            module = _loaded.get(key)
        if module is not None:
            return module
        lib = self.build()
        import tvm_ffi  # imports torch when present; deferred so the CLI never pays for it

        module = tvm_ffi.load_module(str(lib))
        _touch(self.key_dir / "last_used")
        with _state_lock:
            return _loaded.setdefault(key, module)


def _touch(path: Path) -> None:
    try:
        path.touch()
        os.utime(path)
    except OSError:
        pass  # a read-only cache still loads


class _BuildPlan:
    """Everything resolved for one spec: tools, flags, ninja text, key."""

    def __init__(self, spec: JitSpec, *, portable: bool = False):
        # portable: the compilers are placeholders and their versions stay out (the form a
        # prebuilt artifact is matched on); such a plan is never built.
        self.spec = spec
        self.portable = portable
        roots = _Roots()
        tvm = env.tvm_ffi_info()
        if portable:
            self.cxx = None
            self.cxx_path = "${CXX}"
            tools = {"tvm_ffi": tvm.version}
        else:
            self.cxx = toolchain.host_compiler()
            self.cxx_path = self.cxx.path
            tools = {"cxx": [self.cxx.path, self.cxx.identity], "tvm_ffi": tvm.version}

        includes = [roots.add("OASR_JIT_INCLUDE", env.OASR_JIT_INCLUDE_DIR)]
        includes.append(roots.add("OASR_JIT_CSRC", env.OASR_JIT_CSRC_DIR))
        hashed_dirs = [("OASR_JIT_INCLUDE", True), ("OASR_JIT_CSRC", True)]
        for i, d in enumerate(spec.extra_include_dirs):
            includes.append(roots.add(f"INCLUDE_{i}", d))
            hashed_dirs.append((f"INCLUDE_{i}", True))
        if spec.use_cutlass:
            cutlass = env.require_cutlass()
            tools["cutlass"] = cutlass.version
            for i, d in enumerate(cutlass.include_dirs):
                includes.append(roots.add(f"CUTLASS_INCLUDE_{i}", d))
        for i, d in enumerate(tvm.include_dirs):
            includes.append(roots.add(f"TVM_FFI_INCLUDE_{i}", d))
        tvm_lib = roots.add("TVM_FFI_LIB", tvm.lib_dir)

        # Static sources compile from where they are; their directory's headers are hashed too
        # (a quoted #include finds them there).
        source_dirs: dict[Path, str] = {}
        self.source_inputs: list[tuple[SourceFile, str]] = []  # (source, placeholder path)
        for src in spec.sources:
            if src.path is None:
                self.source_inputs.append((src, f"gen/{src.name}"))
                continue
            parent = src.path.parent
            if parent not in source_dirs:
                source_dirs[parent] = roots.add(f"SRC_{len(source_dirs)}", parent)
                hashed_dirs.append((source_dirs[parent], False))
            self.source_inputs.append((src, f"${{{source_dirs[parent]}}}/{src.name}"))

        inc_flags = [f"-I${{{placeholder}}}" for placeholder in includes]
        cflags = [*DEFAULT_CFLAGS, *inc_flags]
        ldflags = [f"-L${{{tvm_lib}}}", "-ltvm_ffi"]
        if spec.is_cuda and portable:
            self.nvcc = None
            self.nvcc_path = "${NVCC}"
            self.arch = _arch.target_arch()
            toolkit_include = "${CUDA_HOME}/include"
        elif spec.is_cuda:
            self.nvcc = toolchain.nvcc()
            self.nvcc_path = self.nvcc.path
            self.arch = _arch.target_arch()
            # A family asked for an architecture it does not declare refuses, naming those
            # it serves (families.Family.supported_compute_capability).
            require_module_arch(spec.name, self.arch)
            # Refused before anything compiles: nvcc would fail every translation unit with
            # "Unsupported gpu architecture".
            toolchain.check_arch_buildable(self.nvcc, self.arch)
            tools["nvcc"] = [self.nvcc.path, self.nvcc.identity]
            toolkit_include = str(self.nvcc.toolkit_root / "include")
        if spec.is_cuda:
            cuda_cflags = [
                *DEFAULT_CUDA_CFLAGS,
                f"-ccbin={self.cxx_path}",
                *self.arch.gencode_flags(),
                f"-DOASR_TARGET_SM={self.arch.capability}",
                *inc_flags,
                *spec.extra_cuda_cflags,
                *env.env_flags("OASR_EXTRA_CUDAFLAGS"),
            ]
            # host TUs of a CUDA module may include the runtime's headers
            cflags.append(f"-I{toolkit_include}")
            # nvcc links the CUDA runtime statically by default: the module needs no
            # libcudart at load time and shares the driver's primary context with torch.
            linker = self.nvcc_path
            ldflags = ["-shared", "-Xlinker=--no-undefined", f"-ccbin={self.cxx_path}", *ldflags]
        else:
            self.nvcc = None
            self.nvcc_path = None
            self.arch = None
            cuda_cflags = []
            linker = self.cxx_path
            ldflags = ["-shared", "-Wl,--no-undefined", *ldflags]
        # --no-undefined: a symbol the module uses but nothing defines (a launcher declared with
        # other parameters than its definition) fails the link, instead of loading lazily and
        # ending the process with a symbol lookup error at the first call.
        cflags += [*spec.extra_cflags, *env.env_flags("OASR_EXTRA_CFLAGS")]
        ldflags += [*spec.extra_ldflags, *env.env_flags("OASR_EXTRA_LDFLAGS")]
        self.cflags, self.cuda_cflags, self.ldflags, self.linker = (
            cflags,
            cuda_cflags,
            ldflags,
            linker,
        )
        self.roots = roots

        manifest = {
            "format": KEY_FORMAT,
            "name": spec.name,
            "ninja": self.ninja_text(placeholders=True),
            "tools": tools,
            "sources": [
                [src.name, hashlib.sha256(src.content()).hexdigest()] for src in spec.sources
            ],
            "headers": {
                placeholder: _hash_headers(roots.paths[placeholder], recursive)
                for placeholder, recursive in hashed_dirs
            },
        }
        blob = json.dumps(manifest, sort_keys=True).encode()
        self.key = hashlib.sha256(blob).hexdigest()[:KEY_LENGTH]
        self.manifest = manifest

    # -- ninja --------------------------------------------------------------------------------

    def _expand(self, text: str, placeholders: bool, *, as_path: bool) -> str:
        if placeholders:
            return text
        for placeholder, path in self.roots.paths.items():
            text = text.replace(f"${{{placeholder}}}", str(path))
        return _ninja_escape_path(text) if as_path else _ninja_escape_arg(text)

    def ninja_text(self, *, placeholders: bool) -> str:
        """build.ninja; with ``placeholders`` the roots stay symbolic (the form the key hashes)."""

        def args(flags):
            return " ".join(self._expand(f, placeholders, as_path=False) for f in flags)

        def tool(path):
            return path if placeholders else _ninja_escape_arg(path)

        name = self.spec.name
        lines = [
            "ninja_required_version = 1.3",
            f"cxx = {tool(self.cxx_path)}",
            f"cflags = {args(self.cflags)}",
            f"linker = {tool(self.linker)}",
            f"ldflags = {args(self.ldflags)}",
        ]
        if self.nvcc_path is not None:
            lines += [f"nvcc = {tool(self.nvcc_path)}", f"cuda_cflags = {args(self.cuda_cflags)}"]
        lines += [
            "",
            "rule cxx",
            "  command = $cxx $cflags -c $in -o $out",
            "  description = compile $out",
            "",
        ]
        if self.nvcc_path is not None:
            lines += [
                "rule nvcc",
                "  command = $nvcc $cuda_cflags -c $in -o $out",
                "  description = compile $out",
                "",
            ]
        lines += [
            "rule link",
            "  command = $linker $in $ldflags -o $out",
            "  description = link $out",
            "",
        ]
        objects = []
        for src, placeholder_path in self.source_inputs:
            obj = f"obj/{src.name}.o"
            objects.append(obj)
            rule = "nvcc" if src.is_cuda else "cxx"
            source = self._expand(placeholder_path, placeholders, as_path=True)
            lines.append(f"build {obj}: {rule} {source}")
        lines.append(f"build {name}.so.partial: link {' '.join(objects)}")
        lines.append(f"default {name}.so.partial")
        return "\n".join(lines) + "\n"

    # -- the locked build ---------------------------------------------------------------------

    def build_locked(self) -> None:
        from .build import run_build

        if self.portable:
            raise RuntimeError(f"the portable plan of {self.spec.name} names no compilers")

        spec = self.spec
        key_dir = spec.key_dir
        lock = BuildLock(
            key_dir / f"{spec.name}.lock",
            what=f"building {spec.name}/{self.key}",
            timeout_s=env.lock_timeout_s(),
        )
        with lock:
            if is_complete_shared_object(spec.lib_path):
                return  # another process built it while we waited
            failure_path = key_dir / f"{spec.name}.so.failed"
            record = _read_failure(failure_path)
            if (
                record is not None
                and lock.waited
                and (
                    record.get("token") in lock.seen_tokens
                    or record.get("time", 0.0) >= lock.wait_started
                )
            ):
                # We waited on that build: its failure is ours, without compiling it again.
                error = JitBuildError(
                    spec.name,
                    self.key,
                    record["command"],
                    record["output"],
                    hint=record.get("hint", ""),
                )
                with _state_lock:
                    _failed[self.key] = error
                raise error
            try:
                run_build(self, key_dir)
            except JitBuildError as error:
                _write_failure(failure_path, error, lock.token)
                with _state_lock:
                    _failed[self.key] = error
                raise
            failure_path.unlink(missing_ok=True)
            _touch(key_dir / "last_used")

    def write_sources_and_ninja(self, key_dir: Path, write=None) -> None:
        """The rendered sources under ``gen/``, ``build.ninja`` and ``spec.json``; ``write(path,
        text)`` writes the first two (the build passes one that leaves unchanged files alone)."""
        if write is None:

            def write(path: Path, text: str) -> None:
                path.write_text(text)

        gen = key_dir / "gen"
        for src, _ in self.source_inputs:
            if src.text is not None:
                gen.mkdir(parents=True, exist_ok=True)
                write(gen / src.name, src.text)
        write(key_dir / "build.ninja", self.ninja_text(placeholders=False))
        info = {
            "name": self.spec.name,
            "key": self.key,
            "arch": self.arch.sm if self.arch else None,
            "roots": {k: str(v) for k, v in self.roots.paths.items()},
            "sources": [
                str(src.path) if src.path else f"gen/{src.name}" for src in self.spec.sources
            ],
            "created": time.time(),
            "manifest": self.manifest,
        }
        (key_dir / "spec.json").write_text(json.dumps(info, indent=1, sort_keys=True))


def _read_failure(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _write_failure(path: Path, error: JitBuildError, token: str) -> None:
    record = {
        "command": error.command,
        "output": error.output,
        "hint": error.hint,
        "token": token,
        "time": time.time(),
        "pid": os.getpid(),
    }
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(record))
    os.replace(tmp, path)


# ---------------------------------------------------------------------------------------------
# requirements, checked before a batch compiles anything


class MissingRequirement(NamedTuple):
    """A tool or header set some specs need and this machine lacks."""

    what: str  # "CUTLASS headers", "nvcc", "the host C++ compiler", "TVM-FFI", "ninja"
    problem: str  # one line: what is wrong and the fix
    modules: tuple[str, ...]  # the specs that need it


def _probe_problem(probe) -> str | None:
    try:
        probe()
    except (RuntimeError, ValueError, OSError) as exc:
        return str(exc).splitlines()[0]
    return None


def _cutlass_problem() -> str | None:
    try:
        found = env.cutlass_info()
    except RuntimeError as exc:  # OASR_CUTLASS_DIR names something else
        return str(exc).splitlines()[0]
    if found is None:
        return f"not found: {env.CUTLASS_FIX}"
    return None


def _nvcc_problem() -> str | None:
    try:
        compiler = toolchain.nvcc()
    except (RuntimeError, ValueError) as exc:
        return str(exc).splitlines()[0]
    try:
        target = _arch.target_arch()
    except (RuntimeError, ValueError) as exc:
        return str(exc).splitlines()[0]
    return toolchain.arch_unsupported_reason(compiler, target)


def _ninja_problem() -> str | None:
    from .build import _ninja

    return _probe_problem(_ninja)


def check_requirements(specs: Sequence[JitSpec]) -> list[MissingRequirement]:
    """What the ``specs`` need that is missing: the host compiler, TVM-FFI and ninja (every
    spec), nvcc able to build the target architecture (CUDA specs), CUTLASS headers
    (``use_cutlass`` specs). Each is probed once; nothing is compiled. Empty when all is there."""
    checks = (
        ("the host C++ compiler", lambda s: True, lambda: _probe_problem(toolchain.host_compiler)),
        ("TVM-FFI", lambda s: True, lambda: _probe_problem(env.tvm_ffi_info)),
        ("ninja", lambda s: True, _ninja_problem),
        ("nvcc", lambda s: s.is_cuda, _nvcc_problem),
        ("CUTLASS headers", lambda s: s.use_cutlass, _cutlass_problem),
    )
    missing = []
    for what, needs, probe in checks:
        needing = tuple(s.name for s in specs if needs(s))
        if not needing:
            continue
        problem = probe()
        if problem is not None:
            missing.append(MissingRequirement(what, problem, needing))
    return missing


# ---------------------------------------------------------------------------------------------
# public constructors


def _flag_list(value, what: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        raise TypeError(f"{what} must be a list of flags, not a string: {value!r}")
    return [str(v) for v in value]


def gen_jit_spec(
    name: str,
    sources: Iterable,
    *,
    extra_cflags: Sequence[str] | None = None,
    extra_cuda_cflags: Sequence[str] | None = None,
    extra_ldflags: Sequence[str] | None = None,
    extra_include_dirs: Sequence | None = None,
    use_cutlass: bool = False,
) -> JitSpec:
    """A module compiled from source files (paths, or `SourceFile`s): CUDA (``.cu``, nvcc) and/or
    host C++ (``.cc``, ``.cpp``; ``$CXX``). ``use_cutlass`` adds the CUTLASS include dirs (keyed
    by its version stamp)."""
    return JitSpec(
        name,
        [_as_source(s) for s in sources],
        extra_cflags=_flag_list(extra_cflags, "extra_cflags"),
        extra_cuda_cflags=_flag_list(extra_cuda_cflags, "extra_cuda_cflags"),
        extra_ldflags=_flag_list(extra_ldflags, "extra_ldflags"),
        extra_include_dirs=[Path(d) for d in (extra_include_dirs or [])],
        use_cutlass=use_cutlass,
    )


@functools.cache
def _jinja_env(search_dir: str):
    import jinja2

    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(search_dir),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,
    )


def render_template(template: str | Path, context: Mapping[str, object]) -> str:
    """Render one Jinja template file; an undefined variable is an error, never empty text."""
    path = Path(template).resolve()
    return _jinja_env(str(path.parent)).get_template(path.name).render(**context)


def gen_jinja_jit_spec(
    name: str,
    templates: Iterable[tuple[str, str | Path, Mapping[str, object]]],
    *,
    sources: Iterable = (),
    extra_cflags: Sequence[str] | None = None,
    extra_cuda_cflags: Sequence[str] | None = None,
    extra_ldflags: Sequence[str] | None = None,
    extra_include_dirs: Sequence | None = None,
    use_cutlass: bool = False,
) -> JitSpec:
    """A module with rendered translation units: each ``(file_name, template, context)`` in
    ``templates`` becomes ``file_name`` (kept in memory, keyed by its text, written under the key's
    ``gen/`` when built), compiled beside the static ``sources``."""
    rendered = [
        SourceFile(name=file_name, text=render_template(template, context))
        for file_name, template, context in templates
    ]
    return gen_jit_spec(
        name,
        [*rendered, *sources],
        extra_cflags=extra_cflags,
        extra_cuda_cflags=extra_cuda_cflags,
        extra_ldflags=extra_ldflags,
        extra_include_dirs=extra_include_dirs,
        use_cutlass=use_cutlass,
    )
