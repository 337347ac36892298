"""gemm_log_softmax's fused heads against the two passes they replace and against PyTorch, on a
grid of CTC-head shapes, in one process (the kernel at every shape, not only where
`oasr_gemm.head`'s rules send calls to it): the one-kernel head (V <= 512), or with
``--cluster`` the cluster head (512 < V <= 12288):

    python packages/oasr-gemm/benchmarks/log_softmax_head.py [--cluster] [--json F] [--dtype D]

Each pair is checked and timed by `oasr_jit.bench.measure` (interleaved medians, inputs rotated
past L2, CUDA-graph replays under 20 µs). The two passes are the route the same call takes with
the heads switched off: cuBLAS or the sm90 GEMM (`gemm`'s selection), then the row pass. An odd
V's logits come from cuBLAS; V 5000 runs whatever the tuning data selects for its GEMM (the
sm90 kernels build on first use).
"""

from __future__ import annotations

import argparse
import json

import torch
import torch.nn.functional as F

import oasr_gemm
from oasr_gemm import head
from oasr_gemm.bench import check_head
from oasr_jit.bench import Case, measure

ROWS = (64, 301, 1000, 2000, 8000, 32000)
VOCAB_K = (
    (500, 256),
    (500, 512),
    (33, 256),
    (255, 256),
    (511, 512),
    (500, 1024),
    (301, 256),
    (383, 256),
)
CLUSTER_ROWS = (1000, 2000, 4000, 8000, 16000, 32000)
CLUSTER_VOCAB_K = ((1025, 256), (2047, 256), (3001, 256), (5000, 256), (1025, 512), (2047, 512))


def _two_passes(A, B, C):
    saved = head.HEAD_MAX_VOCAB, head.cluster_head_wins
    head.HEAD_MAX_VOCAB, head.cluster_head_wins = 0, lambda M, V, K: False
    try:
        return oasr_gemm.gemm_log_softmax(A, B, C)
    finally:
        head.HEAD_MAX_VOCAB, head.cluster_head_wins = saved


def _case(M, V, K, dtype, peer, peer_name):
    torch_dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}[dtype]

    def setup():
        return {
            "A": torch.randn(M, K, device="cuda").to(torch_dtype),
            "B": (torch.randn(V, K, device="cuda") * 3 * K**-0.5).to(torch_dtype),
            "bias": (torch.randn(V, device="cuda") * 0.1).to(torch_dtype),
        }

    return Case(
        name=f"head {dtype} {M}x{V}x{K} vs {peer_name}",
        op="gemm_log_softmax",
        dtype=dtype,
        shape=f"{M}x{V}x{K}",
        setup=setup,
        oasr=lambda i: oasr_gemm.gemm_log_softmax(i["A"], i["B"], i["bias"]),
        peer=lambda i: peer(i["A"], i["B"], i["bias"]),
        peer_name=peer_name,
        flops=2 * M * V * K,
        bytes_moved=2 * (M * K + V * K + V + M * V),
        check=check_head,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--dtype", default="fp16", choices=("fp16", "bf16"))
    parser.add_argument("--cluster", action="store_true", help="the cluster head (V > 512)")
    args = parser.parse_args()
    # the kernel wherever it can run: the sweep measures where it wins (the rules in
    # oasr_gemm.head come from these tables)
    head.HEAD_MIN_ROWS = head.HEAD_MIN_ROWS_ODD_VOCAB = 1
    head.cluster_head_wins = lambda M, V, K: True
    grid = (
        [(M, V, K) for V, K in CLUSTER_VOCAB_K for M in CLUSTER_ROWS]
        if args.cluster
        else [(M, V, K) for V, K in VOCAB_K for M in ROWS]
    )
    peers = {
        "two passes": _two_passes,
        "torch": lambda A, B, C: F.log_softmax(F.linear(A, B, C), dim=-1),
    }
    rows = []
    print(f"{'M x V x K':>18} {'fused':>10} {'two passes':>10} {'torch':>8}  ratios")
    for M, V, K in grid:
        got = {}
        for name, peer in peers.items():
            r = measure(_case(M, V, K, args.dtype, peer, name))
            if r.get("error"):
                print(f"{M}x{V}x{K} vs {name}: {r['error']}")
                continue
            got[name] = (r["oasr_us"], r["peer_us"])
        if len(got) < 2:
            continue
        one = min(got["two passes"][0], got["torch"][0])
        two, ref = got["two passes"][1], got["torch"][1]
        rows.append(
            {"M": M, "V": V, "K": K, "one_kernel_us": one, "two_passes_us": two, "torch_us": ref}
        )
        print(
            f"{M:>8}x{V}x{K:<5} {one:>10.2f} {two:>10.2f} {ref:>8.2f}  "
            f"{two / one:.2f}x two passes, {ref / one:.2f}x torch"
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {
                    "dtype": args.dtype,
                    "head": "cluster" if args.cluster else "one kernel",
                    "gpu": torch.cuda.get_device_name(),
                    "rows": rows,
                },
                f,
                indent=1,
            )


if __name__ == "__main__":
    main()
