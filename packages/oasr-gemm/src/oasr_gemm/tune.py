"""A tuning run: measure GEMM configs on this GPU and write tuning entries (`oasr_jit.tuning`).

    python -m oasr_gemm.tune --out tune_db/sm90/gemm.json      # the shipped (system) tier
    python -m oasr_gemm.tune                                   # the user tier

Per signature (op, dtype, N, K) of the benchmark suite, at each M of a ladder, every candidate
config and PyTorch (``torch``) are checked against the twin and timed with the benchmark harness
(CUDA graphs or events, interleaved, medians). The winner at each M: the fastest config, or
``default`` unless a config beats the default by more than the gate (5%); then PyTorch instead,
unless that kernel beats it by more than `TORCH_MARGIN` (3%: the library never runs its own
kernel where cuBLAS measured faster, nor where it won by run-to-run noise). Consecutive
Ms with one winner form a region whose bound is the largest M measured in it; no region is
open-ended, so a larger M falls through to the next tier. Each entry keeps its evidence
(M -> arm -> µs).

Candidates: the production configs by default (compiled already); ``--configs all`` adds every
tuning config, one JIT module each (minutes of nvcc per config the first time); ``--configs
ID,ID,...`` adds the named ones. The sm80 lane's configs are measured at M <= `SM80_MAX_M` only:
they exist for the grids too small for the GPU, and above that the sm90 kernels take the shapes
(a budget choice of the run, not a measured law). ``--filter`` keeps the signatures whose key
holds a substring (re-tune one width). Each signature's regions are printed as soon as they are
measured, and written to the file when all are. ``--rederive FILE`` measures nothing: it
re-derives every entry's regions of a tuning file from the evidence it keeps, with the rules
above (after a change to them).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from . import configs as config_space
from .configs import DEFAULT, LANE, SM80_LANE, GemmConfig, Sm80Config, config_from_id

#: M = batch × frames: decode-sized to a 48000-frame Whisper batch
M_LADDER = (64, 256, 1024, 4096, 8000, 16000, 32000, 48000)
GATE = 1.05
#: how much faster than cuBLAS a kernel must measure to be served instead of it. At the
#: power-limited large shapes the ratio moves by several percent between runs (48000 x 3840 x
#: 1280: ours 1.1% faster in the shipped run, 0.92-1.01x cuBLAS in four bench runs of session
#: 9), so a win of a few percent is noise, and serving it risks a loss.
TORCH_MARGIN = 1.03
#: the largest M the sm80 lane's configs are measured at
SM80_MAX_M = 4096
TORCH, FALLBACK = "torch", "default"

#: measure(op, dtype, M, N, K, arms) -> {arm: µs}: the default timing is `measure_arms`
Measure = Callable[[str, str, int, int, int, Sequence[str]], dict[str, float]]


def winner(times: dict[str, float], gate: float = GATE, margin: float = TORCH_MARGIN) -> str:
    """The arm to serve this M: the fastest config, or the default (`DEFAULT`'s id) when it is
    within ``gate`` of it (the gate keeps the default against configs that win by noise); then
    PyTorch instead, unless that kernel beats it by more than ``margin``. The order matters: a
    default kept by the gate may be slower than cuBLAS where the fastest config was not."""
    kernels = {arm: t for arm, t in times.items() if arm != TORCH}
    arm = min(kernels, key=kernels.get)
    default_time = kernels.get(DEFAULT.id)
    if default_time is not None and default_time <= kernels[arm] * gate:
        arm = DEFAULT.id
    if TORCH in times and kernels[arm] * margin >= times[TORCH]:
        return TORCH
    return FALLBACK if arm == DEFAULT.id else arm


def partition(points: Iterable[tuple[int, dict[str, float]]], gate: float = GATE) -> list:
    """Regions ``[[m_hi, arm], ...]`` (ascending, none open) from (M, {arm: µs}) points."""
    regions: list[list] = []
    for m, times in sorted(points):
        arm = winner(times, gate)
        if regions and regions[-1][1] == arm:
            regions[-1][0] = m
        else:
            regions.append([m, arm])
    return regions


def signatures(
    suite: str = "asr", dtypes: Sequence[str] = ("fp16",), holding: str | None = None
) -> list:
    """(op, dtype, N, K) of the benchmark suite's cases in ``dtypes``, each once (``holding``:
    only those whose signature key holds that substring)."""
    from oasr_jit.tuning import signature

    from . import bench

    seen = []
    from .selection import OPS

    for case in bench.routines(suite):
        if case.op not in OPS:  # bmm has no tuning data yet
            continue
        _, n, k = (int(v) for v in case.shape.split("x"))
        key = (case.op, case.dtype, n, k)
        name = signature("gemm", case.op, case.dtype, N=n, K=k)
        if case.dtype in dtypes and key not in seen and (holding is None or holding in name):
            seen.append(key)
    return seen


def build_entries(
    sigs: Iterable[tuple[str, str, int, int]],
    candidates: Sequence[GemmConfig | Sm80Config],
    measure: Measure,
    m_ladder: Sequence[int] = M_LADDER,
    gate: float = GATE,
    as_half: bool = False,
    progress: bool = False,
) -> dict:
    """signature key -> {"regions": ..., "evidence": ...} for every (op, dtype, N, K).
    ``as_half``: key fp16 measurements ``dt=half``, serving bf16 too (the kernels of one config
    differ only in the element type). ``progress``: print each entry (JSON) when measured."""
    from oasr_jit.tuning import signature

    if DEFAULT not in candidates:
        raise ValueError("the candidates must include the default config (the gate compares to it)")

    def arms(m: int) -> list[str]:
        chosen = [c.id for c in candidates if c.lane != SM80_LANE or m <= SM80_MAX_M]
        return [*chosen, TORCH]

    entries = {}
    for op, dtype, n, k in sigs:
        points = [(m, measure(op, dtype, m, n, k, arms(m))) for m in m_ladder]
        key_dtype = "half" if as_half and dtype == "fp16" else dtype
        key = signature("gemm", op, key_dtype, N=n, K=k)
        entries[key] = {
            "regions": partition(points, gate),
            "evidence": {f"M={m}": {a: round(us, 3) for a, us in t.items()} for m, t in points},
            "source": "oasr_gemm.tune",
        }
        if progress:
            print(json.dumps({key: entries[key]}), flush=True)
    return entries


def rederive(path: Path) -> None:
    """Rewrite a tuning file's regions from its entries' evidence with the current `winner`
    rules; its configs become those the regions name."""
    from oasr_jit.tuning import write_entries

    data = json.loads(Path(path).read_text())
    entries = {}
    for key, entry in data["entries"].items():
        points = [(int(m.removeprefix("M=")), t) for m, t in entry["evidence"].items()]
        entries[key] = dict(entry, regions=partition(points))
    used = {arm for e in entries.values() for _, arm in e["regions"]} - {TORCH, FALLBACK}
    write_entries(
        path,
        family=data["family"],
        arch=data["arch"],
        lane=data.get("lane"),
        entries=entries,
        configs={cid: config_from_id(cid).to_params() for cid in sorted(used)},
        validators=data["validators"],  # where the evidence was measured, not this machine
        fresh=True,
    )
    print(json.dumps({"rederived": str(path), "entries": len(entries)}))


def measure_arms(op: str, dtype: str, M: int, N: int, K: int, arms: Sequence[str]) -> dict:
    """µs of each arm at one shape, with the benchmark harness (answer checked first)."""
    from oasr_jit import bench

    from . import bench as gemm_bench
    from .dense import _run

    activation = "swish" if op == "gemm_activation" else None
    epilogue = activation or "identity"
    times, torch_times = {}, []
    for arm in arms:
        if arm == TORCH:
            continue  # PyTorch is the peer of every config's case
        config = config_from_id(arm)
        case = gemm_bench._gemm_case(dtype, M, N, K, device="cuda", activation=activation)

        def run(i, config=config):
            import torch

            out = torch.empty(M, N, dtype=i["A"].dtype, device="cuda")
            _run(config, i["A"].dtype, out, i["A"], i["B"], i["bias"], None, epilogue)
            return out

        case.oasr = run
        case.ran = lambda i, config=config: config.id
        result = bench.measure(case, reps=10)  # checks the answer against PyTorch first
        if result["error"]:
            raise RuntimeError(f"{arm} at M={M} N={N} K={K}: {result['error']}")
        times[arm] = result["oasr_us"]
        torch_times.append(result["peer_us"])
    if TORCH in arms:
        times[TORCH] = sorted(torch_times)[len(torch_times) // 2]
    return times


def validators() -> dict:
    """What this run measured under (the soft validators of the file)."""
    import torch

    from oasr_jit import bench

    header = bench.environment_header(family="gemm", suite="tune", filter=None, reps=10)
    return {k: header.get(k) for k in ("gpu", "driver", "torch", "cuda", "oasr_jit")} | {
        "torch_version": torch.__version__
    }


def candidate_configs(spec: str, arch=None) -> list[GemmConfig | Sm80Config]:
    """The configs of ``--configs``: "production", "all", or the production ones plus ids
    (``arch``: whose production configs; default: the process's)."""
    if spec == "all":
        return config_space.all_configs()
    if arch is None:
        from oasr_jit import target_arch

        arch = target_arch()
    chosen = list(config_space.production_configs(arch))
    if spec != "production":
        known = {c.id: c for c in config_space.all_configs()}
        for config_id in (s.strip() for s in spec.split(",")):
            if config_id not in known:
                raise SystemExit(f"unknown config {config_id!r}: see configs.all_configs()")
            if known[config_id] not in chosen:
                chosen.append(known[config_id])
    return chosen


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m oasr_gemm.tune", description=__doc__)
    parser.add_argument("--out", type=Path, help="the file to write (default: the user tier)")
    parser.add_argument("--suite", default="asr", help="benchmark suite of the signatures")
    parser.add_argument(
        "--configs",
        default="production",
        help='"production", "all", or production plus comma-separated config ids',
    )
    parser.add_argument("--fresh", action="store_true", help="replace the file, not merge")
    parser.add_argument(
        "--filter", help="only signatures whose key holds this, e.g. 'N=2048|K=512'"
    )
    parser.add_argument(
        "--rederive",
        type=Path,
        metavar="FILE",
        help="re-derive FILE's regions from its evidence with the current rules (no GPU)",
    )
    parser.add_argument(
        "--dtypes",
        default="fp16",
        help="comma-separated dtypes to measure (default fp16, written as dt=half for both)",
    )
    args = parser.parse_args(argv)

    from oasr_jit.tuning import user_dir, write_entries

    if args.rederive is not None:
        rederive(args.rederive)
        return 0
    candidates = candidate_configs(args.configs)
    out = args.out
    if out is None:
        root = user_dir()
        if root is None:
            parser.error("OASR_TUNE_USER_DB is off: give --out")
        out = root / "sm90" / "gemm.json"
    dtypes = tuple(d.strip() for d in args.dtypes.split(","))
    sigs = signatures(args.suite, dtypes, args.filter)
    if not sigs:
        parser.error(f"no signature of suite {args.suite!r} holds {args.filter!r}")
    entries = build_entries(
        sigs, candidates, measure_arms, as_half=dtypes == ("fp16",), progress=True
    )
    used = {arm for e in entries.values() for _, arm in e["regions"]}
    write_entries(
        out,
        family="gemm",
        arch="sm90",
        lane=LANE,
        entries=entries,
        configs={c.id: c.to_params() for c in candidates if c.id in used},
        validators=validators(),
        fresh=args.fresh,
    )
    print(json.dumps({"written": str(out), "entries": len(entries)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
