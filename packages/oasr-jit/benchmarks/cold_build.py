"""What a cold build costs: per module, its translation units, compile seconds and wall time.

    python packages/oasr-jit/benchmarks/cold_build.py [--family F ...] [--module M ...]
        [--arch 9.0a] [--jobs N] [--json out.json]

Runs ``oasr jit prebuild`` (same selection flags) into a new, empty cache directory, then reads
each module's ``.ninja_log``: ``units`` is its compiled translation units, ``unit_s`` the sum of
their compile seconds (on an unloaded machine with jobs <= cores, about the CPU time),
``slowest_s`` its longest unit (the wall floor of that module with enough cores) and ``wall_s``
first unit start to link end. ``cpu_min`` in the total is user + system time of every compiler
the prebuild ran (``getrusage`` of the children).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def read_ninja_log(path: Path) -> list[tuple[int, int, str]]:
    """``[(start_ms, end_ms, output)]`` of the newest entry per output (format v5+)."""
    entries = {}
    for line in path.read_text().splitlines():
        if line.startswith("#"):
            continue
        parts = line.split("\t")
        if len(parts) >= 4:
            entries[parts[3]] = (int(parts[0]), int(parts[1]), parts[3])
    return sorted(entries.values())


def module_rows(jit_dir: Path) -> list[dict]:
    rows = []
    for log in sorted(jit_dir.glob("*/*/.ninja_log")):
        entries = read_ninja_log(log)
        units = [(s, e, o) for s, e, o in entries if o.endswith(".o")]
        if not entries:
            continue
        rows.append(
            {
                "module": log.parent.parent.name,
                "units": len(units),
                "unit_s": round(sum(e - s for s, e, _ in units) / 1000, 1),
                "slowest_s": round(max((e - s for s, e, _ in units), default=0) / 1000, 1),
                "wall_s": round(
                    (max(e for _, e, _ in entries) - min(s for s, _, _ in entries)) / 1000, 1
                ),
            }
        )
    return sorted(rows, key=lambda r: -r["unit_s"])


def markdown(rows: list[dict], total: dict) -> str:
    lines = [
        "| module | units | compile s (sum) | slowest unit s | wall s |",
        "|---|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| `{r['module']}` | {r['units']} | {r['unit_s']} | {r['slowest_s']} | {r['wall_s']} |"
        )
    lines.append(
        f"| **all** | {total['units']} | {total['unit_s']} | | {total['wall_s']} "
        f"({total['cpu_min']} CPU-min, {total['jobs']} jobs) |"
    )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--family", action="append", default=[])
    parser.add_argument("--module", action="append", default=[])
    parser.add_argument("--filter", action="append", default=[])
    parser.add_argument("--arch", default=os.environ.get("OASR_CUDA_ARCH_LIST", "9.0a"))
    parser.add_argument("--jobs", type=int, default=os.cpu_count())
    parser.add_argument("--jit-dir", help="cache directory to build into (default: a new one)")
    parser.add_argument("--json", help="write the rows and the total here")
    parser.add_argument(
        "--timeout", type=float, help="stop the prebuild after this many seconds (rows: so far)"
    )
    args = parser.parse_args()

    jit_dir = Path(args.jit_dir or tempfile.mkdtemp(prefix="oasr-cold-build-"))
    command = [sys.executable, "-m", "oasr_jit.cli", "jit", "prebuild", "--arch", args.arch]
    command += ["--jobs", str(args.jobs)]
    for flag, values in (("--family", args.family), ("--module", args.module)):
        for value in values:
            command += [flag, value]
    for value in args.filter:
        command += ["--filter", value]
    env = dict(os.environ, OASR_JIT_DIR=str(jit_dir), OASR_CUDA_ARCH_LIST=args.arch)
    start = time.perf_counter()
    proc = subprocess.Popen(command, env=env, start_new_session=True)
    try:
        returncode = proc.wait(timeout=args.timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGTERM)
        returncode = f"timed out after {args.timeout:g} s"
        proc.wait()
    wall = time.perf_counter() - start
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    rows = module_rows(jit_dir)
    total = {
        "units": sum(r["units"] for r in rows),
        "unit_s": round(sum(r["unit_s"] for r in rows), 1),
        "wall_s": round(wall, 1),
        "cpu_min": round((usage.ru_utime + usage.ru_stime) / 60, 1),
        "jobs": args.jobs,
        "arch": args.arch,
        "returncode": returncode,
    }
    print(markdown(rows, total))
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "total": total}, indent=1) + "\n")
    return returncode if isinstance(returncode, int) else 1


if __name__ == "__main__":
    sys.exit(main())
