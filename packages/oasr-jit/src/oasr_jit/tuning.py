"""The tuning database: measured kernel configurations per shape, per architecture (family-free).

One JSON file per (kernel family, arch family), e.g. ``sm90/gemm.json``, in one of two tiers:

    user    ``$OASR_TUNE_USER_DB/<arch>/<family>.json`` (default ``~/.cache/oasr/tune/v1``;
            ``OASR_TUNE_USER_DB=off`` disables the tier); written by tuning runs; first
    system  ``<the family's shipped dir>/<arch>/<family>.json``; reviewed; second

An entry is keyed by the static signature of an operation, ``gemm|op=gemm|dt=half|N=512|K=256``
(`signature`), and indexed by its dynamic dimension (M) through ascending regions that round up:

    "regions": [[512, "b64x64_s3"], [2152, "b128x64_s3"], [null, "torch"]]

M takes the first region whose upper bound is >= M; ``null`` is the catch-all. So a config only
serves sizes at or below the largest it was measured at; an entry without a catch-all passes a
larger M to the next tier. Configs are explicit parameters (``"configs": {id: {...}}``); the
sentinels ``default``, ``torch`` and ``fused`` name the family's untuned choice, PyTorch, and the
fused path. ``dt=half`` serves fp16 and bf16 alike; a ``dt=fp16`` / ``dt=bf16`` entry wins over it
for its own dtype.

Validators: hard ones (schema, family, arch, lane) make a file unusable (skipped with one
warning); soft ones (what the entries were measured under: kernel source hash, GPU, toolchain)
only mark it stale (`TuningDB.status`). A file is read once per epoch (`reload` starts a new one),
so nothing changes a selection inside a process between reloads: a captured CUDA graph and an
eager call run the same kernel. Every resolution is counted per tier; `TuningDB.miss_report`
lists the signatures that fell through to the default.

Writers (`write_entries`) take the file's lock, re-read it and replace only their own signatures,
so entries another process wrote meanwhile survive; the file is replaced atomically.
"""

from __future__ import annotations

import collections
import json
import logging
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .lock import BuildLock

log = logging.getLogger("oasr_jit")

SCHEMA = 1
SENTINELS = ("default", "torch", "fused")
TIERS = ("user", "system", "default")
_DTYPES = {
    "torch.float16": "fp16",
    "float16": "fp16",
    "fp16": "fp16",
    "half": "fp16",
    "torch.bfloat16": "bf16",
    "bfloat16": "bf16",
    "bf16": "bf16",
    "torch.float32": "fp32",
    "float32": "fp32",
    "fp32": "fp32",
}


class TuningFileError(ValueError):
    """A tuning file that cannot be used: bad JSON, a schema or hard-validator mismatch, a
    malformed entry. Readers skip such a file with a warning; writers raise."""


def dtype_key(dtype) -> str:
    """``torch.float16`` / ``"float16"`` / ``"fp16"`` -> ``"fp16"`` (likewise bf16, fp32)."""
    key = _DTYPES.get(str(dtype))
    if key is None:
        raise ValueError(f"no tuning dtype for {dtype!r}; expected fp16, bf16 or fp32")
    return key


def signature(family: str, op: str, dtype: str, **static: int) -> str:
    """The key of an entry: ``signature("gemm", "gemm", "half", N=512, K=256)`` ->
    ``"gemm|op=gemm|dt=half|N=512|K=256"`` (static sizes in the order given)."""
    return "|".join([family, f"op={op}", f"dt={dtype}", *(f"{k}={v}" for k, v in static.items())])


@dataclass(frozen=True)
class Resolution:
    """What a lookup chose: a config id or a sentinel, and the tier it came from."""

    config: str
    tier: str  # "user" | "system" | "default"
    signature: str | None = None  # the entry that served it (None for the default)


@dataclass
class Entry:
    regions: list[tuple[int | None, str]]
    extra: dict[str, Any] = field(default_factory=dict)  # evidence, source, notes, soft, ...

    def lookup(self, m: int) -> str | None:
        for hi, config in self.regions:
            if hi is None or m <= hi:
                return config
        return None


@dataclass
class TuningFile:
    family: str
    arch: str
    lane: str | None
    validators: dict[str, Any]  # soft: what the file's writer ran under
    configs: dict[str, dict[str, Any]]
    entries: dict[str, Entry]

    @classmethod
    def parse(cls, data: Mapping, *, family: str, arch: str, lane: str | None = None):
        """A file's JSON object, checked (hard validators and every entry)."""
        if not isinstance(data, Mapping):
            raise TuningFileError("a tuning file holds a JSON object")
        if data.get("schema") != SCHEMA:
            raise TuningFileError(f"schema {data.get('schema')!r}, this reader knows {SCHEMA}")
        for name, want in (("family", family), ("arch", arch), ("lane", lane)):
            if want is not None and data.get(name) != want:
                raise TuningFileError(f"{name} is {data.get(name)!r}, expected {want!r}")
        configs = data.get("configs", {})
        if not isinstance(configs, Mapping) or any(c in SENTINELS for c in configs):
            raise TuningFileError("configs must map ids (not sentinels) to parameters")
        entries = {}
        for key, raw in dict(data.get("entries", {})).items():
            entries[key] = _parse_entry(key, raw, configs)
        return cls(
            family=str(data["family"]),
            arch=str(data["arch"]),
            lane=data.get("lane"),
            validators=dict(data.get("validators", {})),
            configs={k: dict(v) for k, v in configs.items()},
            entries=entries,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "family": self.family,
            "arch": self.arch,
            "lane": self.lane,
            "validators": self.validators,
            "configs": self.configs,
            "entries": {
                key: {"regions": [list(r) for r in e.regions], **e.extra}
                for key, e in sorted(self.entries.items())
            },
        }


def _parse_entry(key: str, raw, configs: Mapping) -> Entry:
    if not isinstance(raw, Mapping) or not isinstance(raw.get("regions"), list):
        raise TuningFileError(f"entry {key!r}: needs a list of regions")
    regions: list[tuple[int | None, str]] = []
    last = 0
    for i, region in enumerate(raw["regions"]):
        if not (isinstance(region, (list, tuple)) and len(region) == 2):
            raise TuningFileError(f"entry {key!r}: region {i} is not [m_hi, config]")
        hi, config = region
        if hi is None:
            if i != len(raw["regions"]) - 1:
                raise TuningFileError(f"entry {key!r}: only the last region may be open (null)")
        elif isinstance(hi, bool) or not isinstance(hi, int) or hi <= last:
            raise TuningFileError(f"entry {key!r}: region bounds must be ascending ints >= 1")
        else:
            last = hi
        if config not in SENTINELS and config not in configs:
            raise TuningFileError(f"entry {key!r}: config {config!r} is not in the file's configs")
        regions.append((hi, str(config)))
    if not regions:
        raise TuningFileError(f"entry {key!r}: no regions")
    return Entry(regions, {k: v for k, v in raw.items() if k != "regions"})


def user_dir() -> Path | None:
    """The user tier's root: ``$OASR_TUNE_USER_DB`` (``off``: none), else
    ``~/.cache/oasr/tune/v1``."""
    configured = os.environ.get("OASR_TUNE_USER_DB")
    if configured is not None:
        if configured.strip().lower() in ("off", "0", "none", ""):
            return None
        return Path(configured).expanduser()
    return Path.home() / ".cache" / "oasr" / "tune" / f"v{SCHEMA}"


_epoch = 0
_epoch_lock = threading.Lock()


def reload() -> None:
    """Start a new epoch: every `TuningDB` re-reads its files on its next lookup."""
    global _epoch
    with _epoch_lock:
        _epoch += 1


class TuningDB:
    """The tiers of one kernel family on one arch: ``TuningDB("gemm", "sm90", system_dir)``.

    ``resolve(op, dtype, m, N=.., K=..)`` -> `Resolution` (user ▸ system ▸ default), memoised per
    epoch and shape; ``counts`` per tier; ``miss_report()``; ``status()``.
    """

    def __init__(
        self,
        family: str,
        arch: str,
        system_dir: Path | None,
        *,
        lane: str | None = None,
        soft_validators: Mapping[str, Any] | None = None,
    ):
        self.family, self.arch, self.lane = family, arch, lane
        self.system_dir = None if system_dir is None else Path(system_dir)
        self.soft_validators = dict(soft_validators or {})
        self.counts: collections.Counter[str] = collections.Counter()
        self.misses: collections.Counter[str] = collections.Counter()
        self._lock = threading.Lock()
        # (reload epoch, the tiers' files, the memo of lookups in them): replaced as one
        self._state: tuple[int, dict[str, TuningFile | None], dict[tuple, tuple]] = (-1, {}, {})

    def path(self, tier: str) -> Path | None:
        root = user_dir() if tier == "user" else self.system_dir
        return None if root is None else root / self.arch / f"{self.family}.json"

    @property
    def epoch(self) -> int:
        """The `reload` epoch of the snapshot in use: what callers key their own memos on."""
        self._current()
        return self._state[0]

    def _current(self) -> tuple[dict[str, TuningFile | None], dict[tuple, tuple]]:
        """The snapshot's files and the memo of lookups in them, (re)read after a `reload`."""
        epoch, files, memo = self._state
        if epoch == _epoch:  # the per-call path takes no lock
            return files, memo
        with self._lock:
            if self._state[0] != _epoch:
                files = {tier: self._read(tier) for tier in ("user", "system")}
                self._state = (_epoch, files, {})
            return self._state[1], self._state[2]

    def _snapshot(self) -> dict[str, TuningFile | None]:
        return self._current()[0]

    def _read(self, tier: str) -> TuningFile | None:
        path = self.path(tier)
        if path is None or not path.is_file():
            return None
        try:
            data = json.loads(path.read_text())
            return TuningFile.parse(data, family=self.family, arch=self.arch, lane=self.lane)
        except (OSError, ValueError) as exc:  # TuningFileError is a ValueError, as is bad JSON
            log.warning("oasr-jit: tuning file %s skipped: %s", path, exc)
            return None

    def resolve(self, op: str, dtype, m: int, **static: int) -> Resolution:
        """The config for dynamic size ``m`` of ``op`` at ``static`` sizes: the first tier with
        an entry covering m (its own dtype's entry first, then ``dt=half`` for fp16/bf16)."""
        files, memo = self._current()
        # Every eager GEMM call comes through here, so a repeated shape costs one dict lookup
        # keyed on the caller's dtype object (threads racing on a new key store equal values).
        memo_key = (op, dtype, m, *static.items())
        hit = memo.get(memo_key)
        if hit is None:
            dt = dtype_key(dtype)
            found = self._resolve(files, op, dt, m, static)
            miss = signature(self.family, op, dt, **static) if found.tier == "default" else None
            hit = memo[memo_key] = (found, miss)
        found, miss = hit
        self.counts[found.tier] += 1
        if miss is not None:
            self.misses[miss] += 1
        return found

    def _resolve(self, files, op, dt, m, static) -> Resolution:
        keys = [signature(self.family, op, dt, **static)]
        if dt in ("fp16", "bf16"):
            keys.append(signature(self.family, op, "half", **static))
        for tier in ("user", "system"):
            file = files.get(tier)
            if file is None:
                continue
            for key in keys:
                entry = file.entries.get(key)
                config = None if entry is None else entry.lookup(m)
                if config is not None:
                    return Resolution(config, tier, key)
        return Resolution("default", "default")

    def config(self, resolution: Resolution) -> dict[str, Any] | None:
        """The parameters of a resolved config id (None for a sentinel)."""
        if resolution.config in SENTINELS:
            return None
        file = self._snapshot().get(resolution.tier)
        return None if file is None else file.configs.get(resolution.config)

    def miss_report(self) -> list[tuple[str, int]]:
        """Signatures served by the default (no tier had them), most calls first."""
        return self.misses.most_common()

    def status(self) -> dict[str, Any]:
        """Per tier: the file, whether it loaded, its entry count, and whether its soft validators
        (or any entry's own) differ from this process's (stale: it may be slower than a re-tune,
        never wrong — every config is checked against what is compiled at resolve time)."""
        files = self._snapshot()
        out = {}
        for tier in ("user", "system"):
            file = files.get(tier)
            stale = False
            if file is not None and self.soft_validators:
                stamps = [file.validators] + [
                    e.extra["soft"] for e in file.entries.values() if "soft" in e.extra
                ]
                stale = any(
                    stamp.get(k) != v for stamp in stamps for k, v in self.soft_validators.items()
                )
            out[tier] = {
                "path": None if self.path(tier) is None else str(self.path(tier)),
                "loaded": file is not None,
                "entries": 0 if file is None else len(file.entries),
                "stale": stale,
            }
        return out


def write_entries(
    path: Path,
    *,
    family: str,
    arch: str,
    entries: Mapping[str, Mapping[str, Any]],
    configs: Mapping[str, Mapping[str, Any]],
    validators: Mapping[str, Any],
    lane: str | None = None,
    fresh: bool = False,
    timeout_s: float = 60.0,
) -> TuningFile:
    """Merge ``entries`` (signature -> {"regions": [...], ...}) and the configs they name into the
    file at ``path`` under its lock: the file is re-read, this writer's signatures replaced, the
    others kept with the validators they were measured under (their ``soft`` field), and the
    result written atomically. ``fresh=True`` replaces the file. Raises `TuningFileError` for a
    malformed entry or an unusable existing file (it is not overwritten)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with BuildLock(
        path.with_suffix(path.suffix + ".lock"), what="tuning write", timeout_s=timeout_s
    ):
        current = None
        if not fresh and path.is_file():
            current = TuningFile.parse(
                json.loads(path.read_text()), family=family, arch=arch, lane=lane
            )
        merged_configs = {} if current is None else dict(current.configs)
        merged_configs.update({k: dict(v) for k, v in configs.items()})
        merged = {} if current is None else dict(current.entries)
        if current is not None:
            for entry in merged.values():  # stamp the kept entries with their own validators
                entry.extra.setdefault("soft", dict(current.validators))
        for key, raw in entries.items():
            merged[key] = _parse_entry(key, raw, merged_configs)
        used = {c for e in merged.values() for _, c in e.regions}
        result = TuningFile(
            family=family,
            arch=arch,
            lane=lane,
            validators=dict(validators),
            configs={k: v for k, v in merged_configs.items() if k in used},
            entries=merged,
        )
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(result.to_json(), indent=1, sort_keys=True) + "\n")
        os.replace(tmp, path)
    reload()
    return result
