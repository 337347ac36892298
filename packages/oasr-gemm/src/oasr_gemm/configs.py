"""The GEMM config spaces of the two lanes, and their constraints.

``sm90_tma`` (`GemmConfig`, CUTLASS 3.x TMA + wgmma): tile (M, N, K), cluster (M, N), schedule
(ping-pong: two warpgroups take alternate tiles; cooperative: both split one tile's M).

``sm80_mma`` (`Sm80Config`, CUTLASS 2.x ``mma.sync`` with the Sm80 tag, run on sm90 too): tile
(M, N, K), warp tile (M, N), pipeline stages, and how K is split: not at all, serial split-K
(the K slices of a tile run as CTAs that add their partials in turn through the output, under a
semaphore), parallel split-K (each slice writes fp32 partials to a workspace; a second kernel
adds them and applies the epilogue), or Stream-K (the K iterations of all tiles shared evenly
over the SMs). Splitting K is what fills 132 SMs when M is a few hundred rows or less, which is
where cuBLAS ran the small-M calls before this lane.

Each space is the product of its axes, cut by `reject_reason` before anything is tuned or
compiled: an unbuildable variant fails its whole JIT module, and one that spills its
accumulators is never worth measuring. The rejected configs and why are listed by
`rejected_configs()`. A config's id names its lane (sm80 ids start ``s80_``), and so do its
tuning-file parameters (``lane``); `config_from_id` / `config_from_params` read either.

Lanes per architecture (`lanes`): sm_90 builds both; sm_80, sm_86, sm_89, sm_100 and sm_120
build the sm80 lane only (a CUTLASS 3.x tcgen05 lane for sm_100 is not built), each within the
shared memory one CTA may opt into on that architecture (`SMEM_BUDGET`). `default_config(arch)`
is the config an untuned call runs there, `production_configs(arch)` those whose modules `oasr
jit prebuild` builds (every config is a module of its own, built on first use either way).

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
#: the shipped (system) tuning file: the configs it names are production configs (prebuilt)
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
    lane = LANE
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


SM80_LANE = "sm80_mma"
#: (tile M, N, K, warp M, N) of the sm80 lane: 4 warps, or 8 at 128 x 256; K 64 (128-byte rows)
SM80_TILES = (
    (64, 64, 64, 32, 32),
    (64, 128, 64, 32, 64),
    (128, 128, 64, 64, 64),
    (128, 256, 64, 64, 64),
)
SM80_STAGES = (3, 4)
#: how K is split, and into how many slices (Stream-K chooses its own split per SM count)
SM80_SPLITS = (
    ("none", 1),
    ("serial", 2),
    ("serial", 4),
    ("parallel", 2),
    ("parallel", 4),
    ("parallel", 8),
    ("streamk", 1),
)
#: shared memory of an SM that one CTA may take (227 KiB on sm80 and sm90)
MAX_CTA_SMEM = 232_448
#: an mma.sync epilogue stores 8-element (16-byte) vectors with a warp's 32 lanes along N; a
#: narrower tile leaves lanes without columns, and CUTLASS does not check that (wrong outputs)
MIN_SM80_TILE_N = 32


@dataclass(frozen=True, order=True)
class Sm80Config:
    lane = SM80_LANE
    tile_m: int
    tile_n: int
    tile_k: int
    warp_m: int
    warp_n: int
    stages: int
    split: str = "none"  # none | serial | parallel | streamk
    slices: int = 1  # K slices of serial / parallel split-K

    @property
    def id(self) -> str:
        """``s80_t64x128x64_w32x64_s4``, split ones ending ``_serial2``, ``_parallel4`` or
        ``_streamk``."""
        text = (
            f"s80_t{self.tile_m}x{self.tile_n}x{self.tile_k}_w{self.warp_m}x{self.warp_n}"
            f"_s{self.stages}"
        )
        if self.split == "streamk":
            return text + "_streamk"
        if self.split != "none":
            return text + f"_{self.split}{self.slices}"
        return text

    @property
    def warps(self) -> int:
        return (self.tile_m // self.warp_m) * (self.tile_n // self.warp_n)

    @classmethod
    def from_id(cls, text: str) -> Sm80Config:
        """The inverse of `id`; ValueError naming the format otherwise."""
        try:
            lane, tile, warp, stages, *rest = text.split("_")
            if lane != "s80" or len(rest) > 1:
                raise ValueError
            tm, tn, tk = (int(v) for v in tile.removeprefix("t").split("x"))
            wm, wn = (int(v) for v in warp.removeprefix("w").split("x"))
            split, slices = "none", 1
            if rest:
                split = rest[0].rstrip("0123456789")
                if split not in ("serial", "parallel", "streamk"):
                    raise ValueError
                if split != "streamk":
                    slices = int(rest[0][len(split) :])
            config = cls(tm, tn, tk, wm, wn, int(stages.removeprefix("s")), split, slices)
        except ValueError:
            raise ValueError(
                f"{text!r} is not an sm80 GEMM config id "
                "(s80_t<M>x<N>x<K>_w<M>x<N>_s<stages>[_serial<n>|_parallel<n>|_streamk])"
            ) from None
        return config

    def to_params(self) -> dict[str, int | str]:
        return {
            "lane": SM80_LANE,
            "tile_m": self.tile_m,
            "tile_n": self.tile_n,
            "tile_k": self.tile_k,
            "warp_m": self.warp_m,
            "warp_n": self.warp_n,
            "stages": self.stages,
            "split": self.split,
            "slices": self.slices,
        }

    @classmethod
    def from_params(cls, params: dict) -> Sm80Config:
        if params.get("lane") != SM80_LANE:
            raise ValueError(f"config of lane {params.get('lane')!r}, this lane is {SM80_LANE!r}")
        return cls(
            *(int(params[k]) for k in ("tile_m", "tile_n", "tile_k", "warp_m", "warp_n")),
            int(params["stages"]),
            str(params.get("split", "none")),
            int(params.get("slices", 1)),
        )


def _sm80_reject_reason(c: Sm80Config) -> str | None:
    if (c.tile_m, c.tile_n, c.tile_k, c.warp_m, c.warp_n) not in SM80_TILES:
        return "tile outside the sm80 lane's tiles"
    if c.stages not in SM80_STAGES:
        return f"{c.stages} stages is not one of {SM80_STAGES}"
    if (c.split, c.slices) not in SM80_SPLITS:
        return f"split {c.split} x {c.slices} is not one of {SM80_SPLITS}"
    if c.tile_n < MIN_SM80_TILE_N:
        return f"tile_n < {MIN_SM80_TILE_N}: the epilogue's warp would not cover the tile"
    if c.warps not in (2, 4, 8):
        return f"{c.warps} warps per CTA (the tile / warp tile): 2, 4 or 8 run"
    if c.warp_m * c.warp_n // 32 > MAX_ACC_PER_THREAD:
        return f"{c.warp_m * c.warp_n // 32} fp32 accumulators per thread: spills"
    if (c.tile_m + c.tile_n) * c.tile_k * 2 * c.stages > MAX_CTA_SMEM:
        return f"{c.stages} stages of the tile do not fit in an SM's shared memory"
    return None


#: shared memory one CTA may opt into, per compute capability (bytes; the CUDA C++ Programming
#: Guide's table, as include/oasr/common/arch_facts.h has it): what the sm80 lane's stages of a
#: tile must fit on that architecture
SMEM_BUDGET = {
    80: 163 * 1024,
    86: 99 * 1024,
    89: 99 * 1024,
    90: 227 * 1024,
    100: 227 * 1024,
    120: 99 * 1024,
}
#: the compute capabilities the sm90 lane (TMA + wgmma, the sm_90a target) builds for
SM90_LANE_CAPABILITIES = (90,)


def _capability(arch) -> int:
    """90 for a `CudaArch` 9.0a, ``(9, 0)``, ``"9.0a"`` or ``90``."""
    if isinstance(arch, int):
        return arch
    if isinstance(arch, str):
        from oasr_jit import parse_arch

        arch = parse_arch(arch)
    major, minor = tuple(arch)[:2]
    return int(major) * 10 + int(minor)


def _budget(arch) -> int:
    cc = _capability(arch)
    if cc not in SMEM_BUDGET:
        served = ", ".join(f"sm_{c}" for c in SMEM_BUDGET)
        raise ValueError(f"the GEMM lanes are not defined for sm_{cc}; they are for {served}")
    return SMEM_BUDGET[cc]


def lanes(arch) -> tuple[str, ...]:
    """The lanes built for ``arch``: ``("sm90_tma", "sm80_mma")`` on sm_90, ``("sm80_mma",)``
    elsewhere (ValueError for an architecture the family does not serve)."""
    _budget(arch)
    if _capability(arch) in SM90_LANE_CAPABILITIES:
        return (LANE, SM80_LANE)
    return (SM80_LANE,)


def smem_bytes(config: Sm80Config) -> int:
    """The mainloop's shared memory of an sm80 config: its stages of the A and B tiles (the
    epilogue reuses them)."""
    return (config.tile_m + config.tile_n) * config.tile_k * 2 * config.stages


def arch_reject_reason(config, arch) -> str | None:
    """Why ``config`` is not built for ``arch`` (None: it is): `reject_reason`, then the lane
    and the shared-memory budget of the architecture."""
    why = reject_reason(config)
    if why is not None:
        return why
    if config.lane not in lanes(arch):
        return f"the {config.lane} lane is not built for sm_{_capability(arch)}"
    if config.lane == SM80_LANE and smem_bytes(config) > _budget(arch):
        return (
            f"{smem_bytes(config)} bytes of shared memory (the tile's {config.stages} stages) "
            f"exceed sm_{_capability(arch)}'s {_budget(arch)} per CTA"
        )
    return None


def config_from_id(text: str):
    """A config of either lane from its id (ValueError naming both formats otherwise)."""
    if text.startswith("s80_"):
        return Sm80Config.from_id(text)
    return GemmConfig.from_id(text)


def config_from_params(params: dict):
    """A config of either lane from its tuning-file parameters (their ``lane`` says which)."""
    if params.get("lane") == SM80_LANE:
        return Sm80Config.from_params(params)
    return GemmConfig.from_params(params)


#: the untuned choice: the config every shape runs without a tuning entry. Ping-pong 128x128: on
#: the H200 it had the best geometric mean over the tuning run's 120 suite points (0.81x cuBLAS
#: overall, 0.95x at M >= 4096, against 0.79x / 0.89x for cooperative 128x128), because one
#: warp group's epilogue overlaps the other's mainloop.
DEFAULT = GemmConfig(128, 128, 64, 1, 1, "pingpong")
#: production configs with the default: a small-M tile and a wide one
BASIS = (GemmConfig(64, 128, 64, 1, 1, "pingpong"), GemmConfig(128, 256, 64, 1, 1, "cooperative"))
#: bmm's tuned lane (sm90, batched), largest tile first: the launcher takes the largest whose grid
#: fills the device and that is no larger than the problem (csrc/bmm_launcher.h, pick_tuned).
#: Chosen on the H200 by timing six tiles against each other (attention products at
#: T 256-1504 and batched projections): ping-pong 128 x 128 was the fastest wherever N > 64
#: (its epilogue overlaps the other warpgroup's mainloop: K is 64 in q·kᵀ), and 128 x 64 within
#: 5% of the best where N is 64 (attention weights · values)
BMM_TUNED = (
    GemmConfig(128, 128, 64, 1, 1, "pingpong"),
    GemmConfig(128, 64, 64, 1, 1, "pingpong"),
)


def reject_reason(config) -> str | None:
    """Why ``config`` (of either lane) is not built (None: it is)."""
    if isinstance(config, Sm80Config):
        return _sm80_reject_reason(config)
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


def _space() -> list:
    sm90 = [
        GemmConfig(tm, tn, tk, cm, cn, s)
        for tm, tn, tk, (cm, cn), s in itertools.product(
            TILE_M, TILE_N, TILE_K, CLUSTERS, SCHEDULES
        )
    ]
    sm80 = [
        Sm80Config(tm, tn, tk, wm, wn, stages, split, slices)
        for (tm, tn, tk, wm, wn), stages, (split, slices) in itertools.product(
            SM80_TILES, SM80_STAGES, SM80_SPLITS
        )
    ]
    return sm90 + sm80


def _buildable_by_lane(configs) -> list:
    """The buildable ones of ``configs``: the sm90 lane's, then the sm80 lane's, each sorted."""
    built = [c for c in configs if reject_reason(c) is None]
    return sorted(c for c in built if c.lane == LANE) + sorted(
        c for c in built if c.lane == SM80_LANE
    )


def all_configs() -> list:
    """Every buildable config: the sm90 lane's, then the sm80 lane's, each sorted."""
    return _buildable_by_lane(_space())


def rejected_configs() -> dict[str, str]:
    """config id -> why it is not built, for every config of the axes that is cut."""
    return {c.id: why for c in _space() if (why := reject_reason(c)) is not None}


def _shipped_configs() -> list:
    """The buildable configs the shipped tuning file names (none when there is no file)."""
    if not SHIPPED_DB.is_file():
        return []
    try:
        params = json.loads(SHIPPED_DB.read_text()).get("configs", {})
        configs = [config_from_params(p) for p in params.values()]
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        log.warning("oasr-gemm: shipped tuning file %s skipped: %s", SHIPPED_DB, exc)
        return []
    return _buildable_by_lane(configs)


#: the sm80 lane's untuned choice where it is the only lane (sm_80/86/89/100/120): 128 x 128
#: with 64 x 64 warp tiles, 3 stages (96 KiB of shared memory: fits every such architecture's
#: budget), CUTLASS's own sm80 f16 tile; no tuning run has measured these architectures
SM80_DEFAULT = Sm80Config(128, 128, 64, 64, 64, 3)
#: compiled with it there: the small tile (64 KiB), what the sm90 tuning data picks at small M
SM80_BASIS = (Sm80Config(64, 64, 64, 32, 32, 4),)


def default_config(arch):
    """The config an untuned call runs on ``arch``: `DEFAULT` (sm90 lane) on sm_90,
    `SM80_DEFAULT` where the sm80 lane is the only one."""
    return DEFAULT if LANE in lanes(arch) else SM80_DEFAULT


@functools.cache
def _production_configs(cc: int) -> tuple:
    if LANE in lanes(cc):
        out = [DEFAULT, *BASIS]
        out += [c for c in _shipped_configs() if c not in out]
    else:
        out = [SM80_DEFAULT, *SM80_BASIS]
    return tuple(c for c in out if arch_reject_reason(c, cc) is None)


def production_configs(arch) -> tuple:
    """The production configs for ``arch`` (a `CudaArch`, ``"9.0a"`` or ``90``): those whose
    modules `oasr jit prebuild` builds. On sm_90: the default, the basis, and every config the
    shipped tuning file names (both lanes). Elsewhere: `SM80_DEFAULT` and `SM80_BASIS`, those
    that fit the architecture's shared memory. Read once per architecture and frozen for the
    process. Every other config of `all_configs` is a tuning config; no config is both."""
    return _production_configs(_capability(arch))


production_configs.cache_clear = _production_configs.cache_clear  # tests re-read the file


def tuning_configs(arch="9.0a") -> list:
    """The tuning configs of ``arch``: those it builds that are not production (built when a
    tuning run or a user-tier entry asks for one)."""
    production = set(production_configs(arch))
    return [c for c in all_configs() if c not in production and arch_reject_reason(c, arch) is None]
