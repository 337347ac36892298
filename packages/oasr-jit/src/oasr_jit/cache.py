"""The cache on disk: what is there (`inventory`), and removing old keys (`prune`, `clear_cache`).

Nothing removes keys automatically. A key whose build lock is held (a build in progress) is
never touched. Run a prune when no OASR process is starting up: a process that has found a
library but not yet loaded it would fail if the prune removed it in between (a process that has
loaded it keeps running on it).
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import NamedTuple

from . import env
from .elf import is_complete_object_file, is_complete_shared_object
from .lock import BuildLock, describe_holder, is_locked

SECONDS_PER_DAY = 86400.0


class KeyEntry(NamedTuple):
    module: str
    key: str
    path: Path
    size_bytes: int
    last_used: float  # epoch seconds: the last load, else the library's build time
    state: str  # "built", "failed", "building", "incomplete"
    holder: str = ""  # who builds it, when state == "building"

    @property
    def lock_path(self) -> Path:
        return self.path / f"{self.module}.lock"


def _dir_size(path: Path) -> int:
    total = 0
    for dirpath, _, filenames in os.walk(path):
        for name in filenames:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_size
            except OSError:
                pass
    return total


def _entry(module: str, key_dir: Path) -> KeyEntry:
    lib = key_dir / f"{module}.so"
    lock = key_dir / f"{module}.lock"
    stamps = []
    for candidate in (key_dir / "last_used", lib, key_dir):
        try:
            stamps.append(candidate.stat().st_mtime)
            break
        except OSError:
            continue
    holder = ""
    if is_locked(lock):
        state, holder = "building", describe_holder(lock)
    elif is_complete_shared_object(lib):
        state = "built"
    elif (key_dir / f"{module}.so.failed").exists():
        state = "failed"
    else:
        state = "incomplete"
    return KeyEntry(
        module=module,
        key=key_dir.name,
        path=key_dir,
        size_bytes=_dir_size(key_dir),
        last_used=stamps[0] if stamps else 0.0,
        state=state,
        holder=holder,
    )


def finished_objects(key_dir: Path) -> int:
    """How many complete objects an unfinished build left in ``key_dir/obj`` (the next build
    of the key reuses them)."""
    obj_dir = key_dir / "obj"
    if not obj_dir.is_dir():
        return 0
    return sum(is_complete_object_file(p) for p in obj_dir.glob("*.o"))


def inventory(root: Path | None = None) -> list[KeyEntry]:
    """Every key under the cache root, most recently used first within each module."""
    root = env.jit_dir() if root is None else root
    entries: list[KeyEntry] = []
    if not root.is_dir():
        return entries
    for module_dir in sorted(
        p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")
    ):
        keys = [_entry(module_dir.name, d) for d in module_dir.iterdir() if d.is_dir()]
        keys.sort(key=lambda e: e.last_used, reverse=True)
        entries.extend(keys)
    return entries


def _remove_key(entry: KeyEntry) -> bool:
    """Remove a key directory unless its lock is held; holds the lock while removing."""
    lock = BuildLock(entry.lock_path, what="pruning", timeout_s=1.0, blocking=False)
    if not lock.acquire():
        return False
    try:
        shutil.rmtree(entry.path, ignore_errors=True)
    finally:
        lock.release()
    try:
        entry.path.parent.rmdir()  # the module directory, once it has no keys left
    except OSError:
        pass
    return True


def prune(
    *, keep: int = 1, unused_days: float = 0.0, dry_run: bool = False, root: Path | None = None
) -> tuple[list[KeyEntry], list[KeyEntry]]:
    """Remove each module's keys beyond its ``keep`` most recently used ones that nothing has
    loaded for ``unused_days``. Keys being built are never touched. Returns (removed, skipped
    because a build holds them)."""
    if keep < 0:
        raise ValueError(f"keep must be >= 0, got {keep}")
    if unused_days < 0:
        raise ValueError(f"unused_days must be >= 0, got {unused_days}")
    cutoff = time.time() - unused_days * SECONDS_PER_DAY
    by_module: dict[str, list[KeyEntry]] = {}
    for entry in inventory(root):
        by_module.setdefault(entry.module, []).append(entry)
    removed, busy = [], []
    for entries in by_module.values():
        kept = 0
        for entry in entries:  # most recent first
            if entry.state == "building":
                busy.append(entry)
                continue
            if kept < keep:
                kept += 1
                continue
            if entry.last_used > cutoff:
                continue
            if dry_run:
                removed.append(entry)
            elif _remove_key(entry):
                removed.append(entry)
            else:
                busy.append(entry)
    return removed, busy


def clear_cache(*, root: Path | None = None) -> tuple[list[KeyEntry], list[KeyEntry]]:
    """Remove every cached module not being built, and forget this process's failed builds and
    loaded-module table (libraries already loaded stay mapped). Returns (removed, busy)."""
    from .core import _loaded, _state_lock, forget_failed_builds

    forget_failed_builds()
    with _state_lock:
        _loaded.clear()
    return prune(keep=0, unused_days=0.0, root=root)
