"""How close each row norm of the bench runs to a copy of the same bytes (session 16).

The harness's "% copy" divides by the ceiling of a 2 GiB copy. A small kernel cannot reach that:
at 8000 x 512 fp16 (16 MB moved) a plain copy reaches ~75% of it. This times each layer_norm,
rms_norm and add_layer_norm case of `oasr bench norm` against x.clone() (the fused add: x and
residual cloned, the same bytes in two launches), with the harness's own timing (interleaved
medians, graph replays under 20 us, inputs rotated past L2).

    python packages/oasr-norm/benchmarks/experiments/same_bytes_copy.py [out.json]

H200 results: docs/perf/h200_norm_same_bytes_copy.json and docs/perf/h200.md.
"""

import dataclasses
import json
import sys

from oasr_jit import bench


def clone_x(inputs):
    return inputs["x"].clone()


def clone_x_and_residual(inputs):
    return inputs["x"].clone(), inputs["residual"].clone()


def main() -> None:
    results = []
    for case in bench.collect_cases("norm", "asr"):
        if case.op not in ("layer_norm", "rms_norm", "add_layer_norm"):
            continue
        copy = clone_x_and_residual if case.op.startswith("add") else clone_x
        timed = dataclasses.replace(case, peer=copy, peer_name="copy", check=lambda a, b: None)
        r = bench.measure(timed, reps=15)
        results.append(r)
        oasr_us, copy_us = r["oasr_us"], r["peer_us"]
        pct = 100 * copy_us / oasr_us
        print(f"{case.name:36s} oasr {oasr_us:7.2f} us  copy {copy_us:7.2f} us  {pct:5.1f}%")
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
