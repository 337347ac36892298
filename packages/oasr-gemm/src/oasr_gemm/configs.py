"""The GEMM config space of the sm90 lane (CUTLASS 3.x, TMA + wgmma), and its constraints.

A config is one kernel: tile (M, N, K), cluster (M, N), schedule (ping-pong: two warpgroups take
alternate tiles; cooperative: both split one tile's M). The space is the product of the axes
below, cut by `reject_reason` before anything is tuned or compiled: an unbuildable variant fails
its whole JIT module, and one that spills its accumulators is never worth measuring. The
rejected configs and why are listed by `rejected_configs()`.

Pure Python (no torch, no build): the registration and the selection import it.
"""

from __future__ import annotations

import functools
import itertools
import json
import logging
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger("oasr_gemm")

LANE = "sm90_tma"
#: the shipped (system) tuning file: the configs it names are compiled into the production module
SHIPPED_DB = Path(__file__).resolve().parent / "tune_db" / "sm90" / "gemm.json"
TILE_M = (64, 128, 256)
TILE_N = (64, 128, 256)
TILE_K = (64,)  # 64 halves: one 128-byte swizzled row per stage
CLUSTERS = ((1, 1), (2, 1), (1, 2))
SCHEDULES = ("pingpong", "cooperative")

#: fp32 accumulators per thread a warpgroup may hold: past this the kernel spills (255 registers,
#: less the pointers, predicates and epilogue fragments)
MAX_ACC_PER_THREAD = 128
#: shared memory of two mainloop stages, (BM + BN) * BK * 2 bytes at most: CUTLASS's
#: StageCountAutoCarveout must fit two stages and the epilogue in the 227 KiB of an SM
MAX_TWO_STAGE_SMEM = 106_496
#: threads of one consumer warpgroup
WARPGROUP = 128


@dataclass(frozen=True, order=True)
class GemmConfig:
    tile_m: int
    tile_n: int
    tile_k: int
    cluster_m: int
    cluster_n: int
    schedule: str

    @property
    def id(self) -> str:
        """``t128x128x64_c1x1_coop``: the name in tuning files, module and function names."""
        sched = "coop" if self.schedule == "cooperative" else "pp"
        return (
            f"t{self.tile_m}x{self.tile_n}x{self.tile_k}_c{self.cluster_m}x{self.cluster_n}_{sched}"
        )

    @classmethod
    def from_id(cls, text: str) -> GemmConfig:
        """The inverse of `id`; ValueError naming the format otherwise."""
        try:
            tile, cluster, sched = text.split("_")
            tm, tn, tk = (int(v) for v in tile.removeprefix("t").split("x"))
            cm, cn = (int(v) for v in cluster.removeprefix("c").split("x"))
            schedule = {"coop": "cooperative", "pp": "pingpong"}[sched]
        except (ValueError, KeyError):
            raise ValueError(
                f"{text!r} is not a GEMM config id (t<M>x<N>x<K>_c<M>x<N>_coop|pp)"
            ) from None
        return cls(tm, tn, tk, cm, cn, schedule)

    def to_params(self) -> dict[str, int | str]:
        """The explicit parameters a tuning file stores for this config."""
        return {
            "lane": LANE,
            "tile_m": self.tile_m,
            "tile_n": self.tile_n,
            "tile_k": self.tile_k,
            "cluster_m": self.cluster_m,
            "cluster_n": self.cluster_n,
            "schedule": self.schedule,
        }

    @classmethod
    def from_params(cls, params: dict) -> GemmConfig:
        if params.get("lane", LANE) != LANE:
            raise ValueError(f"config of lane {params.get('lane')!r}, this lane is {LANE!r}")
        return cls(
            int(params["tile_m"]),
            int(params["tile_n"]),
            int(params["tile_k"]),
            int(params["cluster_m"]),
            int(params["cluster_n"]),
            str(params["schedule"]),
        )


#: the untuned choice: the config every shape runs without a tuning entry. Ping-pong 128x128: on
#: the H200 it had the best geometric mean over the tuning run's 120 suite points (0.81x cuBLAS
#: overall, 0.95x at M >= 4096, against 0.79x / 0.89x for cooperative 128x128), because one
#: warp group's epilogue overlaps the other's mainloop.
DEFAULT = GemmConfig(128, 128, 64, 1, 1, "pingpong")
#: compiled with the default into the production module: a small-M tile and a wide one
BASIS = (GemmConfig(64, 128, 64, 1, 1, "pingpong"), GemmConfig(128, 256, 64, 1, 1, "cooperative"))


def reject_reason(config: GemmConfig) -> str | None:
    """Why ``config`` is not built (None: it is)."""
    c = config
    if c.schedule not in SCHEDULES:
        return f"schedule {c.schedule!r} is not one of {SCHEDULES}"
    if c.tile_k not in TILE_K or c.tile_m not in TILE_M or c.tile_n not in TILE_N:
        return "tile outside the lane's axes"
    if (c.cluster_m, c.cluster_n) not in CLUSTERS:
        return f"cluster {c.cluster_m}x{c.cluster_n} is not one of {CLUSTERS}"
    warpgroups = 2 if c.schedule == "cooperative" else 1  # consumers sharing one tile
    if c.schedule == "cooperative" and c.tile_m < 2 * 64:
        return "cooperative splits the tile's M over two warpgroups of 64 rows: tile_m >= 128"
    acc = c.tile_m * c.tile_n // (warpgroups * WARPGROUP)
    if acc > MAX_ACC_PER_THREAD:
        return f"{acc} fp32 accumulators per thread (> {MAX_ACC_PER_THREAD}): spills"
    if (c.tile_m + c.tile_n) * c.tile_k * 2 > MAX_TWO_STAGE_SMEM:
        return "two mainloop stages and the epilogue do not fit in shared memory"
    return None


def _space() -> list[GemmConfig]:
    return [
        GemmConfig(tm, tn, tk, cm, cn, s)
        for tm, tn, tk, (cm, cn), s in itertools.product(
            TILE_M, TILE_N, TILE_K, CLUSTERS, SCHEDULES
        )
    ]


def all_configs() -> list[GemmConfig]:
    """Every buildable config of the lane, sorted."""
    return sorted(c for c in _space() if reject_reason(c) is None)


def rejected_configs() -> dict[str, str]:
    """config id -> why it is not built, for every config of the axes that is cut."""
    return {c.id: why for c in _space() if (why := reject_reason(c)) is not None}


def _shipped_configs() -> list[GemmConfig]:
    """The buildable configs the shipped tuning file names (none when there is no file)."""
    if not SHIPPED_DB.is_file():
        return []
    try:
        params = json.loads(SHIPPED_DB.read_text()).get("configs", {})
        configs = [GemmConfig.from_params(p) for p in params.values()]
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        log.warning("oasr-gemm: shipped tuning file %s skipped: %s", SHIPPED_DB, exc)
        return []
    return sorted(c for c in configs if reject_reason(c) is None)


@functools.cache
def production_configs() -> tuple[GemmConfig, ...]:
    """The production module's configs: the default, the basis, and every config the shipped
    tuning file names. Read once and frozen for the process, so the module's key never changes
    under a running program. Every other config of `all_configs` belongs to a tuning module; no
    config is in both."""
    out = [DEFAULT, *BASIS]
    out += [c for c in _shipped_configs() if c not in out]
    return tuple(out)


def tuning_configs() -> list[GemmConfig]:
    production = set(production_configs())
    return [c for c in all_configs() if c not in production]
