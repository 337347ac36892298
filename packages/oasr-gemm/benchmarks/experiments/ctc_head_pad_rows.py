"""From how many outputs gemm_log_softmax's two passes should pad the weight at an odd
vocabulary (`oasr_gemm.head.PAD_MIN_OUTPUTS`), after session 26's row pass, which reads the
padded logits in 16-byte vectors (session 27).

The two passes with the weight padded (cuBLAS at the padded width, then the row pass from the
padded logits) against the same call unpadded (cuBLAS's odd-N GEMM into out, the row pass in
place), the fused heads switched off, by `oasr_jit.bench.measure` (interleaved medians, inputs
rotated past L2, CUDA-graph replays under 20 µs). Prints µs and unpadded / padded (> 1: padding
wins) per shape.
Run: python packages/oasr-gemm/benchmarks/experiments/ctc_head_pad_rows.py [--dtype bf16] [--json F]
"""

import argparse
import json

import torch

import oasr_gemm
from oasr_gemm import head
from oasr_gemm.bench import check_head
from oasr_jit.bench import Case, measure

ROWS = (250, 500, 1000, 2000, 4000)
VOCAB_K = ((601, 256), (1025, 256), (2047, 256), (5001, 256), (1025, 512), (8404, 512))


_KNOBS = ("HEAD_MAX_VOCAB", "cluster_head_wins", "PAD_MIN_VOCAB", "PAD_MIN_OUTPUTS")


def _two_passes(pad: bool):
    never = 1 << 62
    knobs = (0, lambda M, V, K: False, *((0, 0) if pad else (never, never)))

    def run(A, B, C):
        saved = [getattr(head, name) for name in _KNOBS]
        for name, value in zip(_KNOBS, knobs, strict=True):
            setattr(head, name, value)
        try:
            return oasr_gemm.gemm_log_softmax(A, B, C)
        finally:
            for name, value in zip(_KNOBS, saved, strict=True):
                setattr(head, name, value)

    return run


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dtype", default="fp16", choices=("fp16", "bf16"))
    parser.add_argument("--json")
    args = parser.parse_args()
    torch_dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}[args.dtype]
    padded, unpadded = _two_passes(True), _two_passes(False)
    rows = []
    for V, K in VOCAB_K:
        for M in ROWS:

            def setup(M=M, V=V, K=K):
                return {
                    "A": torch.randn(M, K, device="cuda").to(torch_dtype),
                    "B": (torch.randn(V, K, device="cuda") * 3 * K**-0.5).to(torch_dtype),
                    "bias": (torch.randn(V, device="cuda") * 0.1).to(torch_dtype),
                }

            r = measure(
                Case(
                    name=f"pad {args.dtype} {M}x{V}x{K}",
                    op="gemm_log_softmax",
                    dtype=args.dtype,
                    shape=f"{M}x{V}x{K}",
                    setup=setup,
                    oasr=lambda i: padded(i["A"], i["B"], i["bias"]),
                    peer=lambda i: unpadded(i["A"], i["B"], i["bias"]),
                    peer_name="unpadded",
                    check=check_head,
                )
            )
            if r.get("error"):
                print(f"{M}x{V}x{K}: {r['error']}", flush=True)
                continue
            pad_us, plain_us = r["oasr_us"], r["peer_us"]
            rows.append({"M": M, "V": V, "K": K, "padded_us": pad_us, "unpadded_us": plain_us})
            print(
                f"{args.dtype} {M:>5}x{V}x{K:<4} M*V {M * V / 2**20:5.2f}Mi  padded {pad_us:7.2f}  "
                f"unpadded {plain_us:7.2f}  {plain_us / pad_us:.2f}x",
                flush=True,
            )
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"dtype": args.dtype, "gpu": torch.cuda.get_device_name(), "rows": rows}, f)


if __name__ == "__main__":
    main()
