"""What a user's first call waits for: one op, in a fresh process, timed from the call to its
result (the JIT build or the load of a cached / prebuilt module, then the kernel).

    python packages/oasr-jit/benchmarks/first_call.py OP [OP ...] [--cold] [--json out.json]

Each OP runs in its own interpreter (torch imported and CUDA initialised before the clock
starts, as in a process about to call its first op). ``--cold`` gives each a new, empty cache
directory (the build a first call pays); without it the process's cache and any installed
prebuilt wheel answer (``OASR_JIT_PREBUILT`` applies). ``second_ms`` is the next call's time,
the op itself. Needs a CUDA GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

#: op -> (setup, call): tensors on the GPU, then the call the clock times; the GEMMs run with
#: batch_invariant=True so the default config (not the tuning data's pick) is what builds
OPS = {
    "gemm": (
        "a = r(4000, 512, dtype=h); w = r(2048, 512, dtype=h); b = r(2048, dtype=h)",
        "oasr.gemm(a, w, b, batch_invariant=True)",
    ),
    "gemm_swish_bf16": (
        "a = r(4000, 512, dtype=bf); w = r(2048, 512, dtype=bf)",
        "oasr.gemm_activation(a, w, activation='swish', batch_invariant=True)",
    ),
    "gemm_residual": (
        "a = r(4000, 2048, dtype=h); w = r(512, 2048, dtype=h); c = r(4000, 512, dtype=h)",
        "oasr.gemm(a, w, c, batch_invariant=True)",
    ),
    "layer_norm": (
        "x = r(4000, 512, dtype=h); g = r(512, dtype=h); b = r(512, dtype=h)",
        "oasr.layer_norm(x, g, b)",
    ),
    "rms_norm_bf16": ("x = r(4000, 512, dtype=bf); g = r(512, dtype=bf)", "oasr.rms_norm(x, g)"),
    "topk": ("x = r(64, 5000, dtype=h)", "oasr.topk(x, 8)"),
}

PROBE = r"""
import json, sys, time
import torch
torch.zeros(1, device="cuda")
h, bf = torch.float16, torch.bfloat16
def r(*shape, dtype=None):
    return torch.randn(*shape, device="cuda", dtype=dtype)
import oasr
{setup}
torch.cuda.synchronize()
t0 = time.perf_counter()
{call}
torch.cuda.synchronize()
t1 = time.perf_counter()
{call}
torch.cuda.synchronize()
t2 = time.perf_counter()
print(json.dumps({{"first_s": round(t1 - t0, 3), "second_ms": round((t2 - t1) * 1e3, 3)}}))
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("ops", nargs="+", choices=sorted(OPS))
    parser.add_argument("--cold", action="store_true", help="a new, empty cache per op")
    parser.add_argument("--json", help="write the rows here")
    args = parser.parse_args()
    rows = []
    for op in args.ops:
        setup, call = OPS[op]
        env = dict(os.environ)
        if args.cold:
            env["OASR_JIT_DIR"] = tempfile.mkdtemp(prefix="oasr-first-call-")
        code = PROBE.format(setup=setup, call=call)
        proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            print(f"{op}: FAILED\n{proc.stderr[-2000:]}", file=sys.stderr)
            return 1
        row = {"op": op, "cold": args.cold} | json.loads(proc.stdout.splitlines()[-1])
        print(f"{op:16} first call {row['first_s']:8.3f} s   second {row['second_ms']:.3f} ms")
        rows.append(row)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
