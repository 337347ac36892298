"""Cold build and warm load of a JIT module, each in fresh processes.

    python packages/oasr-jit/benchmarks/jit_load.py [--runs 10] [--json out.json] [--profile]

cold: a new cache directory, `build_and_load()` of the core's self-test module (2 CUDA TUs).
warm: a fresh interpreter with the cache populated, in the state of a process about to call its
first op (torch imported and, on a GPU, CUDA initialised): `import oasr_jit`, spec + key, then
`build_and_load()` split into `import tvm_ffi` (TVM-FFI's own import, paid once per process for
all modules) and the ELF check + `dlopen`. `ours` is the whole path minus TVM-FFI's import.
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
import time, json
t0 = time.perf_counter()
import torch
if torch.cuda.is_available():
    torch.zeros(1, device="cuda")  # a process has tensors on the GPU before its first op
t1 = time.perf_counter()
import oasr_jit
from oasr_jit.selftest import gen_selftest_module
t2 = time.perf_counter()
spec = gen_selftest_module()
key = spec.key
t3 = time.perf_counter()
import tvm_ffi
t4 = time.perf_counter()
module = spec.build_and_load()
t5 = time.perf_counter()
print(json.dumps({
    "torch_and_cuda_init_s": t1 - t0, "import_oasr_jit_s": t2 - t1, "key_s": t3 - t2,
    "import_tvm_ffi_s": t4 - t3, "check_and_dlopen_s": t5 - t4, "import_to_loaded_s": t5 - t1,
    "ours_s": (t5 - t1) - (t4 - t3),
}))
"""

PROFILE = r"""
import cProfile, pstats, torch
if torch.cuda.is_available():
    torch.zeros(1, device="cuda")
profile = cProfile.Profile()
profile.enable()
import oasr_jit
from oasr_jit.selftest import gen_selftest_module
gen_selftest_module().build_and_load()
profile.disable()
pstats.Stats(profile).sort_stats("cumulative").print_stats(25)
"""

FIELDS = (
    "import_oasr_jit_s",
    "key_s",
    "import_tvm_ffi_s",
    "check_and_dlopen_s",
    "ours_s",
    "import_to_loaded_s",
    "torch_and_cuda_init_s",
)


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
    result = {
        "cold_build_and_load_s": cold["import_to_loaded_s"],
        "cold_process_wall_s": time.perf_counter() - start,
        "warm_runs": args.runs,
    }
    warm = [run_probe(env) for _ in range(args.runs)]
    for field in FIELDS:
        values = sorted(w[field] for w in warm)
        result[f"warm_{field}_median"] = statistics.median(values)
        result[f"warm_{field}_max"] = values[-1]
    if args.profile:
        subprocess.run([sys.executable, "-c", PROFILE], env=env, check=True)
    for k, v in result.items():
        print(f"{k:36} {v * 1e3:9.1f} ms" if isinstance(v, float) else f"{k:36} {v}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
