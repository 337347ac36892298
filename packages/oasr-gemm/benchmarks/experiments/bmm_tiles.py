"""Experiment (session 9): which sm90 tile should bmm's tuned lane run, by problem?

Builds a bmm module whose tuned lane holds every candidate below (fp16), and times each one,
the general lane (CUTLASS 2.x, 64 x 64 tiles) and torch.matmul on the same tensors, in one
process: a CUDA graph of 20 calls per arm (the calls are 5-40 µs: launch cost would dominate
eager timing), replayed 9 times per round, arms interleaved, the median of 9 rounds. Every arm's
answer is checked against torch.matmul first.

    python packages/oasr-gemm/benchmarks/experiments/bmm_tiles.py
"""

import torch

from oasr_gemm import _jit
from oasr_gemm.batched import batch_views
from oasr_gemm.configs import GemmConfig

CANDIDATES = (
    GemmConfig(128, 128, 64, 1, 1, "cooperative"),
    GemmConfig(128, 128, 64, 1, 1, "pingpong"),
    GemmConfig(128, 64, 64, 1, 1, "cooperative"),
    GemmConfig(64, 128, 64, 1, 1, "pingpong"),
    GemmConfig(128, 64, 64, 1, 1, "pingpong"),
    GemmConfig(64, 64, 64, 1, 1, "pingpong"),
)
# (label, L, M, K, N, B layout): attention products at T 256 / 512 / 1024 / 1504 with heads of
# 64, and batched projections
SHAPES = (
    ("q.kT T256 x128", 128, 256, 64, 256, "b_col"),
    ("attn.v T256 x128", 128, 256, 256, 64, "b_row"),
    ("q.kT T512 x64", 64, 512, 64, 512, "b_col"),
    ("attn.v T512 x64", 64, 512, 512, 64, "b_row"),
    ("q.kT T1024 x32", 32, 1024, 64, 1024, "b_col"),
    ("attn.v T1024 x32", 32, 1024, 1024, 64, "b_row"),
    ("q.kT T1504 x16", 16, 1504, 64, 1504, "b_col"),
    ("attn.v T1504 x16", 16, 1504, 1504, 64, "b_row"),
    ("q.kT T256 x16", 16, 256, 64, 256, "b_col"),
    ("proj 8x4096x512x512", 8, 4096, 512, 512, "b_col"),
    ("proj 2x8192x1024x1024", 2, 8192, 1024, 1024, "b_row"),
)


def graph_us(fn, reps: int = 20):
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=side):
        for _ in range(reps):
            fn()
    torch.cuda.synchronize()

    def run():
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(9):
            graph.replay()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) * 1000 / (9 * reps)

    return run


def interleaved_medians(arms) -> dict:
    """µs per call of each arm: graph_us's rounds, the arms interleaved, the median of 9."""
    runners = {name: graph_us(arm) for name, arm in arms.items()}
    samples = {name: [] for name in runners}
    for _ in range(9):
        for name, run in runners.items():
            samples[name].append(run())
    return {name: sorted(v)[4] for name, v in samples.items()}


def time_shape(module, header, label, L, M, K, N, layout) -> None:
    gen = torch.Generator(device="cuda").manual_seed(0)
    A = torch.randn(L, M, K, device="cuda", generator=gen).half()
    if layout == "b_row":
        B = (torch.randn(L, K, N, device="cuda", generator=gen) * K**-0.5).half()
    else:
        B = (torch.randn(L, N, K, device="cuda", generator=gen) * K**-0.5).half()
        B = B.transpose(-1, -2)
    _, a4, b4, found = batch_views(A, B)
    assert found == layout
    fn = getattr(module, _jit.bmm_function_name("fp16", layout) + "_with")
    want = torch.matmul(A, B)
    out = torch.empty_like(want)
    out4 = out.view(a4.shape[0], a4.shape[1], M, N)
    arms = {"torch": lambda: torch.matmul(A, B, out=out)}
    for choice, name in [(-2, "general"), *enumerate(c.id for c in CANDIDATES)]:
        out.fill_(float("nan"))
        fn(out4, a4, b4, choice)
        torch.testing.assert_close(out, want, rtol=2e-2, atol=2e-2)
        arms[name] = lambda choice=choice: fn(out4, a4, b4, choice)
    med = interleaved_medians(arms)
    best = min((v, k) for k, v in med.items() if k not in ("torch", "general"))
    print(
        f"{label:24s} "
        + " ".join(f"{med[h]:16.2f}" for h in header)
        + f"  best {best[1]} {med['torch'] / best[0]:.2f}x torch",
        flush=True,
    )


def main() -> None:
    spec = _jit.gen_bmm_module("oasr_gemm_bmm_tiles", ("fp16",), ("b_row", "b_col"), CANDIDATES)
    module = spec.build_and_load()
    print(torch.cuda.get_device_name(), torch.__version__)
    header = ["torch", "general"] + [c.id for c in CANDIDATES]
    print(f"{'shape':24s} " + " ".join(f"{h[:16]:>16s}" for h in header) + "  (µs)")
    for shape in SHAPES:
        time_shape(module, header, *shape)


if __name__ == "__main__":
    main()
