"""Does the CTC head's row pass find more of the logits in L2 when it takes the rows the GEMM
wrote last first? (gemm_log_softmax at V 5000 / 8404, docs/gemm.md, "What the 2.5x needs".)

The GEMM pass writes the [M, V] logits (80 MB at 8000 x 5000 fp16; the H200's L2 is 60 MB), and
the row pass reads them back in row order, starting where the GEMM started, so the lines it
finds in L2 are whatever survived; the GEMM's last tiles are the most likely to still be there.
Variants: the production GEMM pass, then the row pass over the rows cut in `parts` slices, run
first to last or last to first (one launch a slice, in place or from the padded buffer).

    python packages/oasr-gemm/benchmarks/experiments/ctc_head_l2_order.py [--json FILE]

Each variant is checked against the production op and timed by `oasr_jit.bench.measure`
(interleaved medians, inputs rotated past L2) against it.
"""

from __future__ import annotations

import argparse
import dataclasses
import json

import torch

import oasr_gemm
from oasr_gemm import head
from oasr_gemm.bench import _head_case
from oasr_jit.bench import measure

SHAPES = ((8000, 5000, 256), (8000, 5000, 512), (32000, 5000, 256), (8000, 8404, 512))
PARTS = (1, 2, 4, 8, 16)


def ordered(A, B, C, parts: int, reverse: bool):
    M = A.shape[0]
    if head.gemm_runs_kernels(A, B, C):  # V a multiple of 8: the row pass runs in place
        out = oasr_gemm.gemm(A, B, C)
        logits = out
    else:
        out, logits = head._cublas_logits(A, B, C, None)
    bounds = [M * i // parts for i in range(parts + 1)]
    order = range(parts - 1, -1, -1) if reverse else range(parts)
    for p in order:
        lo, hi = bounds[p], bounds[p + 1]
        head._row_pass()(out[lo:hi], logits[lo:hi])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args()
    rows = []
    for M, V, K in SHAPES:
        base = _head_case("fp16", M, V, K, device="cuda")
        for parts in PARTS:
            for reverse in (False, True):
                if parts == 1 and reverse:
                    continue
                case = dataclasses.replace(
                    base,
                    name=f"{M}x{V}x{K} {parts} parts{' reversed' if reverse else ''}",
                    oasr=lambda i, p=parts, r=reverse: ordered(i["A"], i["B"], i["bias"], p, r),
                    peer=base.oasr,
                    peer_name="production",
                )
                r = measure(case)
                row = {
                    "M": M,
                    "V": V,
                    "K": K,
                    "parts": parts,
                    "reverse": reverse,
                    "variant_us": r["oasr_us"],
                    "production_us": r["peer_us"],
                    "error": r.get("error"),
                }
                rows.append(row)
                print(json.dumps(row), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"gpu": torch.cuda.get_device_name(), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
