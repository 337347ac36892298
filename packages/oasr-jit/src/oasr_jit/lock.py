"""The per-key build lock: an ``flock`` on ``<key>/<name>.lock`` that names its holder.

Hand-written on ``fcntl.flock`` rather than taken from ``filelock`` because the cache needs three
things that library does not give across its 3.x/4.x versions: the holder's identity inside the
lock file (waiters name it in their log), a non-blocking "is it held?" probe that creates nothing
(``oasr jit status`` / ``prune``), and re-validation after acquiring that the file locked is still
the one at the path (a prune may have removed the key directory while we blocked on it).

The lock is released by the kernel when its process dies, so a killed builder never leaves a
key locked.
"""

from __future__ import annotations

import errno
import fcntl
import json
import logging
import os
import time
from pathlib import Path

from .errors import JitBuildLockTimeout

log = logging.getLogger("oasr_jit")

#: Waiters log this often while another process builds (seconds).
WAIT_LOG_INTERVAL_S = 30.0


def describe_holder(path: Path) -> str:
    """Who holds (or last held) the lock at ``path``, as written by the holder."""
    try:
        info = json.loads(path.read_text() or "{}")
    except (OSError, ValueError):
        return "an unknown process"
    if not info:
        return "an unknown process"
    since = time.strftime("%H:%M:%S", time.localtime(info.get("since", 0)))
    return f"pid {info.get('pid')} on {info.get('host')} (since {since}, {info.get('what', '')})"


def holder_token(path: Path) -> str | None:
    """An id of the current holder's build attempt (``pid@host:since``), if one is recorded."""
    try:
        info = json.loads(path.read_text() or "{}")
    except (OSError, ValueError):
        return None
    return info.get("token")


def is_locked(path: Path) -> bool:
    """Whether some process holds the lock at ``path``; creates nothing."""
    try:
        fd = os.open(path, os.O_RDONLY)  # flock needs no write access: works on read-only caches
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            return True
        raise
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


class BuildLock:
    """``with BuildLock(path, what="building norm"):`` — exclusive, across processes and threads.

    ``waited`` tells afterwards whether another process held the lock when we asked, and
    ``seen_tokens`` which build attempts we waited behind (see `holder_token`).
    """

    def __init__(self, path: Path, *, what: str, timeout_s: float, blocking: bool = True):
        self.path = path
        self.what = what
        self.timeout_s = timeout_s
        self.blocking = blocking
        self.waited = False
        self.wait_started = 0.0  # wall time we first found the lock held
        self.seen_tokens: set[str] = set()
        self.token = ""
        self._fd: int | None = None

    # -- acquire ------------------------------------------------------------------------------

    def _try_flock(self) -> bool:
        """One non-blocking attempt; True when we now hold the lock on the file at the path."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                return False
            raise
        try:
            same_file = os.stat(self.path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same_file = False
        if not same_file:  # the key directory was removed under us: lock the new file instead
            os.close(fd)
            return False
        self._fd = fd
        return True

    def acquire(self) -> bool:
        """Take the lock (polling, so the wait can log and time out); False only when
        non-blocking and held elsewhere. flock excludes open file descriptions, so two threads
        of one process exclude each other as two processes do."""
        start = time.monotonic()
        deadline = start + self.timeout_s
        next_log = start + WAIT_LOG_INTERVAL_S
        while not self._try_flock():
            if not self.blocking:
                return False
            if not self.waited:
                self.waited, self.wait_started = True, time.time()
            token = holder_token(self.path)
            if token:
                self.seen_tokens.add(token)
            now = time.monotonic()
            if now >= deadline:
                raise self._timeout_error()
            if now >= next_log:
                log.warning(
                    "oasr-jit: waiting %.0f s for the build lock %s, held by %s",
                    now - start,
                    self.path,
                    describe_holder(self.path),
                )
                next_log = now + WAIT_LOG_INTERVAL_S
            time.sleep(min(0.05 + 0.05 * (now - start), 0.5, max(deadline - now, 0.0)))
        self._write_holder()
        return True

    def _timeout_error(self) -> JitBuildLockTimeout:
        return JitBuildLockTimeout(
            f"gave up after {self.timeout_s:.0f} s waiting for the build lock {self.path}, held "
            f"by {describe_holder(self.path)}. If that process is stuck, stop it; to wait "
            "longer set OASR_JIT_LOCK_TIMEOUT (seconds)."
        )

    def _write_holder(self) -> None:
        since = time.time()
        self.token = f"{os.getpid()}@{os.uname().nodename}:{since:.6f}"
        info = {
            "pid": os.getpid(),
            "host": os.uname().nodename,
            "since": since,
            "what": self.what,
            "token": self.token,
        }
        data = json.dumps(info).encode()
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, data, 0)

    # -- release ------------------------------------------------------------------------------

    def release(self) -> None:
        if self._fd is None:
            return
        try:
            os.ftruncate(self._fd, 0)  # nobody holds it now
        except OSError:
            pass
        fcntl.flock(self._fd, fcntl.LOCK_UN)
        os.close(self._fd)
        self._fd = None

    def __enter__(self) -> BuildLock:
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()
