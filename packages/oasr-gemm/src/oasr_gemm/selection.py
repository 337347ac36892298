"""Which kernel runs a GEMM: a pure function of the call and the tuning snapshot.

    select_default_config(op, M, N, K, dtype) -> Selection

1. ``batch_invariant``: the default config, whatever M (rows bitwise independent of M).
2. ``OASR_GEMM_HEURISTIC=0``: the default config (no tuning data is read).
3. The tuning database (`oasr_jit.tuning`): the user tier, then the shipped system tier
   (``tune_db/sm90/gemm.json``), keyed ``gemm|op=<op>|dt=<dtype>|N=<N>|K=<K>`` with regions of M
   that round up; a config id, or the sentinels ``default`` / ``torch``.
4. No entry and M below `GEMM_MIN_ROWS`: PyTorch (cuBLAS), faster there on the H200 (sm_90
   only: the rule is that measurement).
5. Otherwise the default config of the architecture (`configs.default_config`).

The architecture is the process's (`oasr_jit.target_arch`: the GPU's, or
``OASR_CUDA_ARCH_LIST``). Tuning data is shipped for sm_90 only; on an architecture with no table
(none shipped, none in the user tier) every call runs the default config of its lane, and the
first selection of the process says so once (a warning on the ``oasr_gemm`` logger).

`bmm` has no tuning tiers: `bmm_lane` names the kernel a call would run.

Every tier is counted (`tier_counts`), and the signatures that reached the default are listed by
`rule_miss_report()`. The snapshot changes only on `oasr_jit.tuning.reload()`, so an eager call
and a CUDA graph captured later run the same kernel.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

from oasr_jit.tuning import TuningDB

from . import configs
from .configs import (
    LANE,
    GemmConfig,
    Sm80Config,
    arch_reject_reason,
    config_from_id,
    config_from_params,
    default_config,
    lanes,
)

log = logging.getLogger("oasr_gemm")

#: Untuned M below this goes to PyTorch. Measured on the H200 (the shipped tuning run's
#: evidence): at M 64 and 256 cuBLAS beat every sm90 config on 28 of the suite's 30 (N, K)
#: points, by 1.04-1.9x (a persistent TMA kernel's fixed cost, about 5 us, against cuBLAS's
#: small-M kernels); from M 1024 on the sm90 configs win where the epilogue is fused.
GEMM_MIN_ROWS = 512
OPS = ("gemm", "gemm_activation")
SYSTEM_DB_DIR = configs.SHIPPED_DB.parents[1]  # tune_db/, holding sm90/gemm.json


@dataclass(frozen=True)
class Selection:
    """A config to run (or ``torch``: the PyTorch twin), and where the choice came from:
    ``user`` / ``system`` (the tuning tiers), ``default``, ``rule`` (GEMM_MIN_ROWS),
    ``batch_invariant`` or ``heuristic_off``."""

    config: GemmConfig | Sm80Config | None  # None: the PyTorch twin
    tier: str

    @property
    def backend(self) -> str:
        return "torch" if self.config is None else "oasr"


_db = TuningDB("gemm", "sm90", SYSTEM_DB_DIR, lane=LANE)
#: arch tag (``sm90``) -> its tuning tiers; other architectures' files may hold either lane
_dbs: dict[str, TuningDB] = {"sm90": _db}
_rule_counts: dict[str, int] = {}
#: the process's architecture, once known (`process_arch`)
_arch = None
#: the architectures whose missing tuning table was reported (once per process)
_untuned_reported: set[str] = set()


def process_arch():
    """The architecture this process's GEMMs run on (`oasr_jit.target_arch`, frozen at first
    use; RuntimeError naming ``OASR_CUDA_ARCH_LIST`` where there is no GPU)."""
    global _arch
    if _arch is None:
        from oasr_jit import target_arch

        _arch = target_arch()
    return _arch


def _tiers(arch) -> TuningDB:
    """The tuning tiers of ``arch``, reporting once per process when it has no table."""
    tag = arch.family
    db = _dbs.get(tag)
    if db is None:
        db = _dbs[tag] = TuningDB("gemm", tag, SYSTEM_DB_DIR)
    if tag not in _untuned_reported:
        _untuned_reported.add(tag)
        status = db.status()
        if not any(tier["loaded"] for tier in status.values()):
            log.warning(
                "oasr-gemm: no tuning table was measured for %s (none shipped, none in the user "
                "tier %s): every GEMM runs the %s lane's default config %s",
                arch.sm,
                status["user"]["path"],
                default_config(arch).lane,
                default_config(arch).id,
            )
    return db


def _heuristic_enabled() -> bool:
    return os.environ.get("OASR_GEMM_HEURISTIC", "1").strip() not in ("0", "off", "false")


def _count(tier: str) -> None:
    _rule_counts[tier] = _rule_counts.get(tier, 0) + 1


_RULE = Selection(None, "rule")


def select_default_config(
    op: str, M: int, N: int, K: int, dtype, *, batch_invariant: bool = False
) -> Selection:
    """The kernel a `gemm` / `gemm_activation` call runs: a pure function of the call and the
    tuning snapshot (module docstring: the tiers in order).

    Parameters
    ----------
    op : {"gemm", "gemm_activation"}
        The op whose tuning entries apply (the tuning keys name it).
    M, N, K : int
        The problem: M rows of A (its leading dims' product), N rows of B, K the reduction.
    dtype : torch.dtype or str
        torch.float16 / torch.bfloat16 (or "fp16" / "bf16").
    batch_invariant : bool
        True returns the default config whatever M (the tier ``batch_invariant``).

    Returns
    -------
    Selection
        ``config`` (a `GemmConfig` / `Sm80Config` to run, or None: PyTorch, i.e. cuBLAS),
        ``tier`` (``user`` / ``system``: the tuning database's tiers; ``rule``: no entry and M
        below `GEMM_MIN_ROWS`; ``default``; ``batch_invariant``; ``heuristic_off``:
        ``OASR_GEMM_HEURISTIC=0``) and ``backend`` ("oasr" or "torch").

    Raises
    ------
    ValueError
        An unknown ``op``.

    Notes
    -----
    Selecting launches and builds nothing; a tuning entry that names a config which is not
    built logs a warning and selects the default. The snapshot changes only on
    ``oasr_jit.tuning.reload()``, so an eager call and a CUDA graph captured later agree.
    Equivalent to asking what ``gemm(..., backend="auto")`` would run.

    Examples
    --------
    >>> s = oasr_gemm.select_default_config("gemm", 8000, 2048, 512, torch.float16)
    >>> s.tier, s.backend, s.config and s.config.id
    """
    if op not in OPS:
        raise ValueError(f"op must be one of {OPS}, got {op!r}")
    arch = process_arch()
    if batch_invariant:
        _count("batch_invariant")
        return Selection(default_config(arch), "batch_invariant")
    if not _heuristic_enabled():
        _count("heuristic_off")
        return Selection(default_config(arch), "heuristic_off")
    db = _tiers(arch)
    found = db.resolve(op, dtype, M, N=N, K=K)
    if found.tier == "default" and M < GEMM_MIN_ROWS and LANE in lanes(arch):
        _count("rule")  # no entry: measured data comes first
        return _RULE
    _count(found.tier)
    key = (arch, found, db.epoch)  # a config id's parameters can change with the snapshot
    selection = _selections.get(key)
    if selection is None:
        if len(_selections) > 4096:  # old snapshots' entries
            _selections.clear()
        selection = _selections[key] = _selection(found, db, arch)
    return selection


def lane_default() -> GemmConfig | Sm80Config:
    """The default config of this process's architecture (`configs.default_config`)."""
    return default_config(process_arch())


#: the Selection of each resolution (per snapshot): building and checking a config is most of
#: a selection's host time, and an eager call pays it on every launch
_selections: dict[tuple, Selection] = {}


def _selection(found, db: TuningDB, arch) -> Selection:
    default = default_config(arch)
    if found.config == "torch":
        return Selection(None, found.tier)
    if found.config in ("default", "fused"):
        return Selection(default, found.tier)
    params = db.config(found)
    config = config_from_params(params) if params else config_from_id(found.config)
    why = arch_reject_reason(config, arch)
    if why is not None:
        log.warning(
            "oasr-gemm: tuning entry %s names %s, which is not built (%s); using the default",
            found.signature,
            found.config,
            why,
        )
        return Selection(default, "default")
    return Selection(config, found.tier)


def tier_counts() -> dict[str, int]:
    """Selections per tier since import (or `reset_counts`)."""
    return dict(_rule_counts)


def reset_counts() -> None:
    _rule_counts.clear()
    for db in _dbs.values():
        db.counts.clear()
        db.misses.clear()


def rule_miss_report() -> list[tuple[str, int]]:
    """Signatures no tuning tier covered (served by the default), most calls first."""
    return _dbs.get(process_arch().family, _db).miss_report()


def tuning_status() -> dict:
    """Per tier: the file, whether it loaded, its entries, whether it is stale."""
    return _tiers(process_arch()).status()


def bmm_lane(A, B) -> str:
    """The kernel ``bmm(A, B)`` runs (nothing is launched): ``"sm90 <config id>"`` (the tuned
    lane; the general lane runs instead if CUTLASS refuses the problem), ``"sm80 <load>/<store>"``
    (the general lane's tensor-op kernel and its vector widths; ``" 128x128"`` added for its
    wide tile), ``"simt"``, ``"small_k"``, ``"small_n"`` or ``"empty"``. Raises like `bmm` on a
    call it would refuse; needs a CUDA device (it asks the built bmm module)."""
    from .batched import lane  # torch and the bmm module: only when asked

    return lane(A, B)
