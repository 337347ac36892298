"""Cold build and warm load of a JIT module, each in fresh processes.

    python packages/oasr-jit/benchmarks/jit_load.py [--runs 10] [--json out.json]

cold: a new cache directory, `build_and_load()` of the core's self-test module (2 CUDA TUs).
warm: a fresh interpreter with the cache populated; times `import oasr_jit` + spec + key +
ELF check + load (torch already imported, as in any process that calls an op), and separately
the whole path including `import torch`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

PROBE = r"""
import time, json, sys
t0 = time.perf_counter()
import torch
t1 = time.perf_counter()
import oasr_jit
from oasr_jit.selftest import gen_selftest_module
spec = gen_selftest_module()
key = spec.key
t2 = time.perf_counter()
module = spec.build_and_load()
t3 = time.perf_counter()
print(json.dumps({"torch_import_s": t1 - t0, "key_s": t2 - t1, "load_s": t3 - t2,
                  "import_to_loaded_s": t3 - t1, "with_torch_s": t3 - t0}))
"""


PROFILE = r"""
import cProfile, pstats, torch
profile = cProfile.Profile()
profile.enable()
import oasr_jit
from oasr_jit.selftest import gen_selftest_module
gen_selftest_module().build_and_load()
profile.disable()
pstats.Stats(profile).sort_stats("cumulative").print_stats(25)
"""


def run_probe(env) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--json")
    parser.add_argument("--profile", action="store_true", help="cProfile one warm load")
    args = parser.parse_args()
    env = dict(os.environ, OASR_JIT_DIR=tempfile.mkdtemp(prefix="oasr-jit-bench-"))
    start = time.perf_counter()
    cold = run_probe(env)
    cold_wall = time.perf_counter() - start
    warm = [run_probe(env) for _ in range(args.runs)]
    result = {
        "cold_build_and_load_s": cold["load_s"],
        "cold_process_wall_s": cold_wall,
        "warm_runs": args.runs,
    }
    for field in ("key_s", "load_s", "import_to_loaded_s", "with_torch_s", "torch_import_s"):
        values = sorted(w[field] for w in warm)
        result[f"warm_{field}_median"] = statistics.median(values)
        result[f"warm_{field}_max"] = values[-1]
    if args.profile:
        subprocess.run([sys.executable, "-c", PROFILE], env=env, check=True)
    for k, v in result.items():
        print(f"{k:36} {v:.4f}" if isinstance(v, float) else f"{k:36} {v}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
