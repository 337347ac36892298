"""Running one locked build: ninja, parallelism, progress, and the partial-then-rename link."""

from __future__ import annotations

import atexit
import fcntl
import functools
import os
import re
import shutil
import subprocess
import sys
import tempfile
import termios
import threading
import time
from pathlib import Path

from .elf import is_complete_object_file, is_complete_shared_object
from .errors import JitBuildError

#: A build that runs longer than this reports progress on stderr (seconds).
PROGRESS_AFTER_S = 3.0
PROGRESS_EVERY_S = 10.0

# Peak compiler memory per job (GB): a CUTLASS 3.x TU peaks at 2-4 GB in cicc, a plain CUDA TU
# near 1 GB, host C++ with TVM-FFI's headers near 0.5 GB.
_JOB_MEMORY_GB = {"cutlass": 4.0, "cuda": 1.5, "host": 0.75}


def _available_cpus() -> int:
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    try:  # cgroup v2 CPU quota ("max 100000" when unlimited)
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()
        if quota != "max":
            cpus = min(cpus, max(1, int(int(quota) / int(period))))
    except (OSError, ValueError):
        pass
    return max(1, cpus or 1)


def _available_memory_gb() -> float:
    available = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                available = int(line.split()[1]) / 2**20
                break
    except OSError:
        pass
    try:  # cgroup v2 memory limit
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        if limit != "max":
            used = int(Path("/sys/fs/cgroup/memory.current").read_text())
            cgroup_free = (int(limit) - used) / 2**30
            available = cgroup_free if available is None else min(available, cgroup_free)
    except (OSError, ValueError):
        pass
    return available if available is not None else 8.0


def default_jobs(kind: str) -> int:
    """``MAX_JOBS`` if set, else what both the cores and the free memory allow."""
    raw = os.environ.get("MAX_JOBS", "").strip()
    if raw:
        try:
            jobs = int(raw)
        except ValueError:
            raise ValueError(f"MAX_JOBS must be a positive integer, got {raw!r}") from None
        if jobs < 1:
            raise ValueError(f"MAX_JOBS must be a positive integer, got {raw!r}")
        return jobs
    by_memory = int(_available_memory_gb() // _JOB_MEMORY_GB[kind])
    return max(1, min(_available_cpus(), by_memory))


class _JobBudget:
    """The compiler jobs of one process, shared by its concurrent builds, when ninja cannot join
    a jobserver (ninja < 1.13; `_Jobserver` is the better way).

    Each build's ``-j`` is what the cores and the free memory allow when it starts; builds
    started together (threads of one process, e.g. a thread pool prebuilding several modules)
    would each see the whole machine and run several times that many compilers. On the H200
    machine (16 cores, 128 GB) seven CUTLASS modules built that way started some 70 compilers of
    2-4 GB each and had finished 6 of their 64 units after 560 s, where one such module alone
    builds in about 100 s. So a build takes its jobs from this budget, and waits while all of
    them are taken. A grant is fixed for the build's life: a module that started while the others
    held most jobs runs its units one or two at a time even after they finish.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self.running = 0

    def take(self, wanted: int, limit: int) -> int:
        """Up to ``wanted`` jobs (at least 1) once fewer than ``limit`` are running."""
        with self._cond:
            while self.running >= limit:
                self._cond.wait()
            granted = max(1, min(wanted, limit - self.running))
            self.running += granted
            return granted

    def give_back(self, jobs: int) -> None:
        with self._cond:
            self.running -= jobs
            self._cond.notify_all()


_JOB_BUDGET = _JobBudget()


class _Jobserver:
    """A GNU make jobserver for the builds of one process: a FIFO holding ``limit`` one-byte
    tokens. A build takes one token for ninja's first job and runs ninja (>= 1.13) without
    ``-j`` and with MAKEFLAGS naming the FIFO; ninja takes a token for every further job and
    puts it back when the job ends. So concurrent builds share ``limit`` jobs job by job: a
    module of 14 units gets the cores the others leave, as they leave them, which the static
    `_JobBudget` grant cannot do (on the H200 machine, five 14-unit CUTLASS modules built side
    by side on static grants left one of them at 7 of 14 units after 370 s).

    Tokens a killed ninja held are lost; whenever no build of this server is running, the pool
    is topped up to ``limit`` again.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._dir = tempfile.mkdtemp(prefix="oasr-jit-jobs-")
        self.path = os.path.join(self._dir, "fifo")
        os.mkfifo(self.path, 0o600)
        self._fd = os.open(self.path, os.O_RDWR)  # both ends stay open: never EOF
        self._lock = threading.Lock()
        self._active = 0
        os.write(self._fd, b"+" * limit)
        atexit.register(self._remove)

    def _remove(self) -> None:
        """At exit: the FIFO and its directory go (the descriptor closes with the process)."""
        shutil.rmtree(self._dir, ignore_errors=True)

    def makeflags(self) -> str:
        return f"-j{self.limit} --jobserver-auth=fifo:{self.path}"

    def available(self) -> int:
        """Tokens in the FIFO now."""
        count = bytearray(4)
        fcntl.ioctl(self._fd, termios.FIONREAD, count)
        return int.from_bytes(count, sys.byteorder)

    def take(self) -> bytes:
        """One token, waiting for it (blocks while ``limit`` jobs run)."""
        token = os.read(self._fd, 1)
        with self._lock:
            self._active += 1
        return token

    def give(self, token: bytes) -> None:
        with self._lock:
            self._active -= 1
            os.write(self._fd, token)
            if self._active == 0:  # nothing runs: every token should be home
                missing = self.limit - self.available()
                if missing > 0:
                    os.write(self._fd, b"+" * missing)


_JOBSERVERS: dict[tuple[str, int], _Jobserver] = {}
_JOBSERVERS_LOCK = threading.Lock()


def _jobserver(kind: str, limit: int) -> _Jobserver | None:
    """The process's jobserver for builds of ``kind``, made on first use with ``limit`` jobs
    (None where a FIFO cannot be made). It keeps that size, since the free memory the limit
    comes from moves while compilers run; a MAX_JOBS setting gets a pool of its own size."""
    key = (kind, limit if os.environ.get("MAX_JOBS", "").strip() else 0)
    with _JOBSERVERS_LOCK:
        if key not in _JOBSERVERS:
            try:
                _JOBSERVERS[key] = _Jobserver(limit)
            except OSError:
                return None
        return _JOBSERVERS[key]


#: the first ninja release that joins a GNU make jobserver (MAKEFLAGS --jobserver-auth=fifo:)
JOBSERVER_NINJA = (1, 13)


def _ninja_version(path: str) -> tuple[int, int]:
    """(major, minor) of a ninja binary; (0, 0) if it does not say."""
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30)
        major, minor = re.match(r"(\d+)\.(\d+)", out.stdout.strip()).groups()
        return int(major), int(minor)
    except (OSError, subprocess.SubprocessError, AttributeError):
        return (0, 0)


def _ninja_candidates() -> list[str]:
    """PATH's ninja, then the PyPI wheel's (a dependency of oasr-jit)."""
    found = []
    on_path = shutil.which("ninja")
    if on_path:
        found.append(on_path)
    try:
        import ninja

        candidate = Path(ninja.BIN_DIR) / "ninja"
        if candidate.exists():
            found.append(str(candidate))
    except ImportError:
        pass
    return found


@functools.cache
def _ninja() -> tuple[str, bool]:
    """The ninja to run and whether it joins a jobserver: the first candidate that can, else
    the first found."""
    candidates = _ninja_candidates()
    if not candidates:
        raise RuntimeError("ninja not found: `pip install ninja`")
    for path in candidates:
        if _ninja_version(path) >= JOBSERVER_NINJA:
            return path, True
    return candidates[0], False


_FAILED_RE = re.compile(r"^FAILED: (.*)$")


def _failing_command(output: str) -> str:
    """The command line ninja printed after ``FAILED: <outputs>``."""
    lines = output.splitlines()
    for i, line in enumerate(lines):
        if _FAILED_RE.match(line) and i + 1 < len(lines):
            return lines[i + 1].strip()
    return ""


def _hint(plan) -> str:
    if plan.arch is not None:
        return (
            f"compiled for {plan.arch.sm} with {plan.nvcc.path} (CUDA {plan.nvcc.release}); "
            "set OASR_CUDA_ARCH_LIST / CUDA_HOME / OASR_NVCC to change, then "
            "oasr_jit.forget_failed_builds() (or start a new process)"
        )
    return f"compiled with {plan.cxx.path}; set CXX to change"


def discard_incomplete_objects(key_dir: Path) -> list[Path]:
    """Remove every ``obj/*.o`` that is not a complete ELF object (a write cut short by a kill
    or a full disk); returns them. ninja trusts an object its log recorded whatever happened to
    the file since, so this check runs before every resumed build."""
    removed = []
    obj_dir = key_dir / "obj"
    if not obj_dir.is_dir():
        return removed
    for obj in sorted(obj_dir.glob("*.o")):
        if not is_complete_object_file(obj):
            obj.unlink(missing_ok=True)
            removed.append(obj)
    return removed


def _write_if_changed(path: Path, text: str) -> None:
    """Write ``text`` unless ``path`` holds it already (a rewrite would make ninja, which
    compares mtimes, recompile what the earlier attempt finished)."""
    try:
        if path.read_text() == text:
            return
    except (OSError, UnicodeDecodeError):
        pass
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


#: How the build of a batch (``oasr jit prebuild``) reports where it is: set per thread by
#: `batch_position`, read by the progress line.
_batch = threading.local()


class BatchProgress:
    """Modules of one batch: how many there are and how many have finished (thread-safe)."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.done = 0
        self._lock = threading.Lock()

    def finished(self) -> None:
        with self._lock:
            self.done += 1


def set_batch(progress: BatchProgress | None) -> None:
    """Name the batch the calling thread's builds belong to (None: a lone build)."""
    _batch.progress = progress


def _context_text() -> str:
    """What the build is for, ending in ", " (or ""): the batch's modules, else the op whose
    first call started it."""
    progress = getattr(_batch, "progress", None)
    if progress is not None:
        return f"{progress.done}/{progress.total} modules done, "
    from .api_logging import calling_op

    op = calling_op(with_dtypes=True)
    return f"first call of {op}, " if op else ""


def progress_line(
    label: str, context: str, done: int, total: int, elapsed: float, kept: int = 0
) -> str:
    """One progress line. Past the first unit this build finished, it estimates the time left
    from this build's pace: ``elapsed / (done - kept)`` per unit still to do (``kept``: units an
    earlier attempt finished)."""
    done = min(done, total)
    text = f"oasr-jit: building {label} ({context}{done}/{total} units, {elapsed:.0f} s"
    finished_here = done - kept
    if finished_here > 0 and done < total:
        left = elapsed / finished_here * (total - done)
        text += f", ~{max(1.0, left):.0f} s left"
    return text + ")"


def run_build(plan, key_dir: Path) -> None:
    """Build ``plan`` in ``key_dir`` (lock held) and rename the link into place.

    Resumable: the objects an earlier, interrupted attempt finished stay in ``obj/`` and ninja
    compiles only the others (its log records each finished compile; a compile cut short left
    no record, so it runs again). Objects that are not complete ELF files are removed first.
    Only the link goes through ``<name>.so.partial``, which is never reused.
    """
    spec = plan.spec
    partial = key_dir / f"{spec.name}.so.partial"
    partial.unlink(missing_ok=True)
    spec.lib_path.unlink(missing_ok=True)
    key_dir.mkdir(parents=True, exist_ok=True)
    discard_incomplete_objects(key_dir)
    plan.write_sources_and_ninja(key_dir, write=_write_if_changed)

    kind = "host" if not spec.is_cuda else ("cutlass" if spec.use_cutlass else "cuda")
    label = f"{spec.name}" + (f" for {plan.arch.sm}" if plan.arch else "")
    ninja, joins_jobserver = _ninja()
    limit = default_jobs(kind)
    server = _jobserver(kind, limit) if joins_jobserver else None
    total_units = len(spec.sources) + 1
    if server is not None:
        token = server.take()
        try:
            output, returncode = _run_ninja(
                [ninja, "-C", str(key_dir)],
                label=label,
                total_units=total_units,
                makeflags=server.makeflags(),
            )
        finally:
            server.give(token)
    else:
        jobs = _JOB_BUDGET.take(len(spec.sources), limit)
        try:
            output, returncode = _run_ninja(
                [ninja, "-C", str(key_dir), "-j", str(jobs)],
                label=label,
                total_units=total_units,
            )
        finally:
            _JOB_BUDGET.give_back(jobs)
    if returncode != 0:
        raise JitBuildError(spec.name, plan.key, _failing_command(output), output, _hint(plan))
    if not is_complete_shared_object(partial):
        raise JitBuildError(
            spec.name,
            plan.key,
            f"{plan.linker} ... -o {partial}",
            f"the linker exited 0 but {partial} is not a complete shared library",
            _hint(plan),
        )
    os.replace(partial, spec.lib_path)


def _die_with_parent() -> None:
    """In the ninja child: SIGTERM it when the building thread dies (e.g. the process is killed),
    so a killed build never leaves compilers writing into the key directory. ninja passes the
    signal on to the compilers it runs."""
    try:
        import ctypes
        import signal

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except Exception:
        pass


def _run_ninja(
    argv: list[str], *, label: str, total_units: int, makeflags: str | None = None
) -> tuple[str, int]:
    """Run ninja, collecting its output; past a few seconds, report progress on stderr (what
    the build is for: `_context_text`). ``makeflags``: the jobserver ninja joins (none: an
    outer MAKEFLAGS is not passed on, so ninja keeps to its ``-j``)."""
    env = dict(os.environ, NINJA_STATUS="[%f/%t] ")
    env.pop("MAKEFLAGS", None)
    if makeflags is not None:
        env["MAKEFLAGS"] = makeflags
    proc = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        bufsize=1,
        preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
    )
    lines: list[str] = []
    done = [0]  # units finished: those an earlier attempt left, then ninja's
    kept = [None]  # units an earlier attempt left (known from ninja's first status line)

    def reader():
        for line in proc.stdout:
            lines.append(line)
            match = re.match(r"^\[(\d+)/(\d+)\] ", line)
            if match:
                # ninja prints "[f/t]" when an edge *starts*; f-1 of the t edges it runs have
                # finished, and the units it does not run were finished before.
                started, planned = int(match.group(1)), int(match.group(2))
                if kept[0] is None:
                    kept[0] = total_units - planned
                done[0] = max(done[0], total_units - planned + started - 1)

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    start = time.monotonic()
    last_report, last_done = 0.0, -1
    while True:
        try:
            proc.wait(timeout=0.5)
            break
        except subprocess.TimeoutExpired:
            pass
        elapsed = time.monotonic() - start
        if elapsed >= PROGRESS_AFTER_S and (
            done[0] != last_done or elapsed - last_report >= PROGRESS_EVERY_S
        ):
            line = progress_line(
                label, _context_text(), done[0], total_units, elapsed, kept[0] or 0
            )
            print(line, file=sys.stderr, flush=True)
            last_report, last_done = elapsed, done[0]
    thread.join()
    if last_done >= 0:
        verdict = "built" if proc.returncode == 0 else "FAILED"
        print(
            f"oasr-jit: {verdict} {label} in {time.monotonic() - start:.1f} s",
            file=sys.stderr,
            flush=True,
        )
    return "".join(lines), proc.returncode
