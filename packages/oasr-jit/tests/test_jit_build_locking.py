"""Concurrent and interrupted builds: one compile per key across processes, kills, truncation,
the in-process and cross-process failure memo, the lock timeout and the waiter's log."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from jit_helpers import run_python

from oasr_jit import JitBuildError, JitBuildLockTimeout, forget_failed_builds, gen_jit_spec
from oasr_jit.lock import BuildLock

BUILD_AND_CALL = """
import sys, oasr_jit
spec = oasr_jit.gen_jit_spec("shared_mod", [{src!r}])
try:
    module = spec.build_and_load()
except oasr_jit.JitBuildError as exc:
    print("BUILD-ERROR", str(exc).splitlines()[0])
    sys.exit(3)
print("RESULT", module.add_one(41))
"""


def _spawn(code: str, **env) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, **env),
    )


def _wait_for(predicate, timeout=60.0, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.mark.parametrize("processes", [4])
def test_many_processes_compile_once(host_source, counting_cxx, processes):
    counting_cxx.slow_down(1.0)  # keep the first build in flight while the others arrive
    procs = [_spawn(BUILD_AND_CALL.format(src=str(host_source))) for _ in range(processes)]
    outputs = [p.communicate(timeout=300) for p in procs]
    for proc, (out, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, err
        assert "RESULT 42" in out
    assert counting_cxx.compiles == 1, f"{counting_cxx.compiles} compiles for one key"


def test_killed_build_leaves_nothing_loadable(host_source, counting_cxx):
    counting_cxx.slow_down(30)
    builder = _spawn(BUILD_AND_CALL.format(src=str(host_source)))
    _wait_for(lambda: counting_cxx.compiles == 1, what="the compile to start")
    builder.send_signal(signal.SIGKILL)
    builder.wait(timeout=30)
    spec = gen_jit_spec("shared_mod", [host_source])
    assert not spec.lib_path.exists(), "a killed build must not leave a library"
    counting_cxx.slow_down(None)
    assert spec.build_and_load().add_one(1) == 2, "the next build must succeed"
    assert counting_cxx.compiles == 2


def test_partial_link_is_never_loaded(host_source, counting_cxx):
    spec = gen_jit_spec("shared_mod", [host_source])
    spec.key_dir.mkdir(parents=True)
    partial = spec.key_dir / "shared_mod.so.partial"
    partial.write_bytes(b"\x7fELF" + b"\0" * 60)  # what a link killed early leaves
    assert spec.build_and_load().add_one(1) == 2
    assert counting_cxx.compiles == 1
    assert not partial.exists()


def test_truncated_library_is_rebuilt(host_source, counting_cxx):
    spec = gen_jit_spec("shared_mod", [host_source])
    lib = spec.build()
    data = lib.read_bytes()
    lib.write_bytes(data[: len(data) // 2])
    assert not spec.is_built
    # A fresh process (nothing loaded yet) must rebuild, not dlopen the truncated file; the
    # key's finished object is reused, so only the link runs again.
    proc = run_python(BUILD_AND_CALL.format(src=str(host_source)))
    assert "RESULT 42" in proc.stdout
    assert counting_cxx.compiles == 1
    assert spec.is_built


def test_in_process_failure_memo_and_rearm(tmp_path, counting_cxx):
    src = tmp_path / "bad.cc"
    src.write_text("#error deliberate failure\n")
    spec = gen_jit_spec("failing", [src])
    with pytest.raises(JitBuildError, match="deliberate failure") as first:
        spec.build()
    assert counting_cxx.compiles == 1
    # Same key, same process: the remembered error, no compile (also through a new spec object).
    with pytest.raises(JitBuildError, match="deliberate failure") as again:
        gen_jit_spec("failing", [src]).build_and_load()
    assert counting_cxx.compiles == 1
    assert again.value is not first.value and again.value.output == first.value.output
    # Fixing the cause makes a new key: builds at once.
    src.write_text("int ok() { return 1; }\n")
    gen_jit_spec("failing", [src]).build()
    assert counting_cxx.compiles == 2
    # Re-arming retries the old key.
    src.write_text("#error deliberate failure\n")
    assert forget_failed_builds() == 1
    with pytest.raises(JitBuildError):
        gen_jit_spec("failing", [src]).build()
    assert counting_cxx.compiles == 3


def test_waiters_get_the_builders_failure(tmp_path, counting_cxx):
    src = tmp_path / "bad.cc"
    src.write_text("#include <tvm/ffi/function.h>\n#error deliberate failure\n")
    counting_cxx.slow_down(5.0)  # the waiters must arrive while the builder compiles
    code = BUILD_AND_CALL.format(src=str(src)).replace("shared_mod", "failing_shared")
    builder = _spawn(code)
    _wait_for(lambda: counting_cxx.compiles == 1, what="the builder's compile")
    waiters = [_spawn(code) for _ in range(2)]
    for proc in [builder, *waiters]:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 3, (out, err)
        assert "deliberate failure" in out
    assert counting_cxx.compiles == 1, "waiters must take the failure, not rebuild"
    # A process that arrives after the failure builds again (the cause may be fixed).
    counting_cxx.slow_down(None)
    late = run_python(code, check=False)
    assert late.returncode == 3
    assert counting_cxx.compiles == 2


HOLD_LOCK = """
import sys, time
from pathlib import Path
from oasr_jit.lock import BuildLock
lock = BuildLock(Path({path!r}), what="holding for a test", timeout_s=5)
lock.acquire()
print("HELD", flush=True)
time.sleep({seconds})
"""


def test_lock_timeout_is_raised_and_not_remembered(host_source, counting_cxx, monkeypatch):
    spec = gen_jit_spec("shared_mod", [host_source])
    holder = _spawn(HOLD_LOCK.format(path=str(spec.key_dir / "shared_mod.lock"), seconds=30))
    assert holder.stdout.readline().strip() == "HELD"
    monkeypatch.setenv("OASR_JIT_LOCK_TIMEOUT", "1")
    start = time.monotonic()
    with pytest.raises(JitBuildLockTimeout) as info:
        spec.build()
    assert 0.9 <= time.monotonic() - start < 10
    message = str(info.value)
    assert f"pid {holder.pid}" in message and "OASR_JIT_LOCK_TIMEOUT" in message
    assert counting_cxx.compiles == 0
    holder.kill()
    holder.wait()
    # Not a failure: once the holder is gone the same process builds.
    assert spec.build_and_load().add_one(2) == 3


def test_waiter_logs_the_holder(tmp_path, monkeypatch, caplog):
    from oasr_jit import lock as lock_module

    monkeypatch.setattr(lock_module, "WAIT_LOG_INTERVAL_S", 0.3)
    path = tmp_path / "k" / "m.lock"
    holder = _spawn(HOLD_LOCK.format(path=str(path), seconds=1.5))
    assert holder.stdout.readline().strip() == "HELD"
    with caplog.at_level("WARNING", logger="oasr_jit"):
        with BuildLock(path, what="waiting test", timeout_s=30) as lock:
            assert lock.waited
    holder.wait()
    waits = [r.getMessage() for r in caplog.records if "waiting" in r.getMessage()]
    assert waits and f"pid {holder.pid}" in waits[0] and "holding for a test" in waits[0]


def test_lock_survives_removal_of_its_directory(tmp_path):
    """A prune may delete a key dir while a builder blocks on its lock; the builder must then
    lock the new file at the path, not the orphaned one."""
    path = tmp_path / "key" / "m.lock"
    first = BuildLock(path, what="a", timeout_s=5)
    first.acquire()
    import shutil

    shutil.rmtree(path.parent)
    second = BuildLock(path, what="b", timeout_s=5)
    assert second.acquire()
    assert path.exists()
    second.release()
    first.release()


def test_is_locked_probe_creates_nothing(tmp_path):
    from oasr_jit.lock import is_locked

    path = tmp_path / "nothing" / "m.lock"
    assert not is_locked(path)
    assert not path.parent.exists()
    with BuildLock(path, what="probe", timeout_s=5):
        proc = run_python(
            f"from oasr_jit.lock import is_locked; from pathlib import Path; "
            f"print(is_locked(Path({str(path)!r})))"
        )
        assert proc.stdout.strip() == "True"
    assert not is_locked(path)


def test_non_blocking_acquire(tmp_path):
    path = tmp_path / "m.lock"
    holder = _spawn(HOLD_LOCK.format(path=str(path), seconds=30))
    try:
        assert holder.stdout.readline().strip() == "HELD"
        lock = BuildLock(path, what="try", timeout_s=5, blocking=False)
        assert lock.acquire() is False
    finally:
        holder.kill()
        holder.wait()
    assert BuildLock(Path(path), what="try", timeout_s=5, blocking=False).acquire()
