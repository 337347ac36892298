"""Does the CTC head's logits round trip stay in L2 when the two passes run a block of rows at a
time? (gemm_log_softmax at V 5000 / 8404, docs/gemm.md, "What the 2.5x needs".)

The two passes write the [M, V] logits (80 MB at 8000 x 5000 fp16) and read them back: two trips
through DRAM that PyTorch's pair makes too. Run per block of `rows` rows (10-20 MB of logits),
the row pass may find its block still in L2, where the GEMM just wrote it, and only the
log-probabilities go to DRAM. An odd V's padded buffer is one block, reused by every block, so it
never has to leave L2 at all. Variants:

- ``chunk R``: for each block of R rows, cuBLAS computes the logits, then the row pass runs on
  them (one stream);
- ``overlap R``: the same, the row pass on a second stream so that a block's row pass runs
  while the next block's GEMM does (two padded buffers alternate).

    python packages/oasr-gemm/benchmarks/experiments/ctc_head_chunks.py [--json FILE]

Each variant is checked against the production op and timed by `oasr_jit.bench.measure`
(CUDA-graph replays, inputs rotated past L2) against PyTorch's log_softmax(linear(...)).
"""

from __future__ import annotations

import argparse
import dataclasses
import json

import torch
import torch.nn.functional as F

import oasr_gemm
from oasr_gemm import head
from oasr_gemm.bench import _head_case
from oasr_jit.bench import measure

SHAPES = ((8000, 5000, 256), (8000, 5000, 512), (8000, 8404, 512), (32000, 5000, 256))
ROWS = (1024, 2048, 4096)


def chunked(A, B, C, rows: int, overlap: bool):
    M = A.shape[0]
    V = B.shape[0]
    out = torch.empty(M, V, dtype=A.dtype, device=A.device)
    padded = -(-V // 8) * 8
    if padded != V:
        b = F.pad(B, (0, 0, 0, padded - V))
        c = F.pad(C, (0, padded - V))
        buffers = [torch.empty(rows, padded, dtype=A.dtype, device=A.device) for _ in range(2)]
    else:
        b, c = B, C
    main = torch.cuda.current_stream()
    side = torch.cuda.Stream() if overlap else main
    done = [torch.cuda.Event(), torch.cuda.Event()]  # a buffer's row pass finished
    for n, r0 in enumerate(range(0, M, rows)):
        r1 = min(M, r0 + rows)
        o = out[r0:r1]
        if padded != V:
            if overlap and n >= 2:
                main.wait_event(done[n % 2])
            logits = buffers[n % 2][: r1 - r0]
            torch.addmm(c, A[r0:r1], b.t(), out=logits)
            rows_in = logits[:, :V]
        else:
            torch.addmm(c, A[r0:r1], b.t(), out=o)
            rows_in = o
        if overlap:
            side.wait_stream(main)
            with torch.cuda.stream(side):
                head._row_pass()(o, rows_in)
                done[n % 2].record(side)
        else:
            head._row_pass()(o, rows_in)
    if overlap:
        main.wait_stream(side)
    return out


def _case(M, V, K, dtype, name, fn):
    """The bench's CTC-head case (same inputs and check, PyTorch as the peer), timing `fn`."""
    case = _head_case(dtype, M, V, K, device="cuda")
    return dataclasses.replace(
        case, name=f"{case.name} {name}", oasr=lambda i: fn(i["A"], i["B"], i["bias"])
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--dtype", default="fp16", choices=("fp16", "bf16"))
    args = parser.parse_args()
    variants = {"production": oasr_gemm.gemm_log_softmax}
    for rows in ROWS:
        for overlap in (False, True):
            label = f"{'overlap' if overlap else 'chunk'} {rows}"
            variants[label] = lambda A, B, C, r=rows, o=overlap: chunked(A, B, C, r, o)
    results = []
    for M, V, K in SHAPES:
        for label, fn in variants.items():
            r = measure(_case(M, V, K, args.dtype, label, fn))
            r.update(M=M, V=V, K=K, variant=label)
            results.append(r)
            if r.get("error"):
                print(f"{M}x{V}x{K} {label}: {r['error']}", flush=True)
                continue
            print(
                f"{M}x{V}x{K} {label:>14}: {r['oasr_us']:8.2f} us, torch {r['peer_us']:8.2f} us,"
                f" {r['peer_us'] / r['oasr_us']:.2f}x",
                flush=True,
            )
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"gpu": torch.cuda.get_device_name(), "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
