"""Eager cost per call of OASR ops against their PyTorch peers: small shapes, called back to back
with no synchronization, so the time per call is the host's (Python checks, allocation, the FFI
call, the launch) wherever the GPU work is shorter. A CUDA graph replay removes this cost; the
`oasr bench` tables time the GPU and do not show it.

    python packages/oasr-kernels/benchmarks/host_cost.py [--json FILE]

Each op is checked against its peer first, then both are timed interleaved (5 rounds of 2000
calls, the median round). Ops built on first call (JIT) are built before timing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch
import torch.nn.functional as F

import oasr_decoder
import oasr_gemm
import oasr_norm


def _cases(dev: str) -> dict:
    h = torch.float16
    x = torch.randn(64, 512, device=dev, dtype=h)
    res = torch.randn(64, 512, device=dev, dtype=h)
    w, b = torch.randn(512, device=dev, dtype=h), torch.randn(512, device=dev, dtype=h)
    scores = torch.randn(8, 4, 25, 25, device=dev, dtype=h)
    a = torch.randn(64, 512, device=dev, dtype=h)
    weight = torch.randn(512, 512, device=dev, dtype=h) * 0.05
    head = torch.randn(500, 512, device=dev, dtype=h) * 0.05
    head_bias = torch.randn(500, device=dev, dtype=h)
    frames = [torch.randn(8000, 512, device=dev, dtype=h) for _ in range(4)]  # 8 MB each
    log_probs = torch.randn(64, 5000, device=dev).log_softmax(-1)
    turn = iter(range(1 << 62))

    def frame():
        return frames[next(turn) % len(frames)]

    # name: (oasr call, peer call, tolerance on the compared output)
    return {
        "layer_norm 64x512": (
            lambda: oasr_norm.layer_norm(x, w, b, 1e-5),
            lambda: F.layer_norm(x, (512,), w, b, 1e-5),
            2e-2,
        ),
        "rms_norm 64x512": (
            lambda: oasr_norm.rms_norm(x, w, 1e-6),
            lambda: F.rms_norm(x, (512,), w, 1e-6),
            2e-2,
        ),
        "add_layer_norm 64x512": (
            lambda: oasr_norm.add_layer_norm(x, res, w, b, 1e-5)[0],
            lambda: F.layer_norm(x + res, (512,), w, b, 1e-5),
            2e-2,
        ),
        "swish 64x512": (lambda: oasr_norm.swish(x), lambda: F.silu(x), 2e-3),
        "softmax 8x4x25x25": (
            lambda: oasr_norm.softmax(scores),
            lambda: torch.softmax(scores, -1),
            2e-3,
        ),
        "gemm 64x512x512 (+bias)": (
            lambda: oasr_gemm.gemm(a, weight, b),
            lambda: F.linear(a, weight, b),
            2e-2,
        ),
        "gemm_log_softmax 64x500x512": (
            lambda: oasr_gemm.gemm_log_softmax(a, head, head_bias),
            lambda: F.log_softmax(F.linear(a, head, head_bias), -1),
            3e-2,
        ),
        "gemm_log_softmax 8000x500x512": (
            lambda: oasr_gemm.gemm_log_softmax(frame(), head, head_bias),
            lambda: F.log_softmax(F.linear(frame(), head, head_bias), -1),
            None,  # rotating inputs: checked at 64 rows above
        ),
        "topk 64x5000 k10": (
            lambda: oasr_decoder.topk(log_probs, 10).values,
            lambda: torch.topk(log_probs, 10).values,
            0.0,
        ),
    }


def _per_call_us(fn, calls: int) -> float:
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / calls * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("host_cost.py needs a CUDA GPU")
    results = []
    print(f"{'op':32} {'oasr µs':>8} {'torch µs':>9} {'ratio':>6}")
    for name, (mine, peer, tol) in _cases("cuda").items():
        if tol is not None:
            torch.testing.assert_close(mine().float(), peer().float(), atol=tol, rtol=tol)
        for fn in (mine, peer):  # warm: JIT loads, cuBLAS handles, allocator blocks
            for _ in range(50):
                fn()
        rounds = [
            (_per_call_us(mine, args.calls), _per_call_us(peer, args.calls)) for _ in range(5)
        ]
        oasr_us = statistics.median(r[0] for r in rounds)
        torch_us = statistics.median(r[1] for r in rounds)
        results.append({"op": name, "oasr_us": round(oasr_us, 2), "torch_us": round(torch_us, 2)})
        print(f"{name:32} {oasr_us:8.2f} {torch_us:9.2f} {torch_us / oasr_us:5.2f}×", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
                       "results": results}, f, indent=1)  # fmt: skip


if __name__ == "__main__":
    main()
