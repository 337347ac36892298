"""Why does the bench time bf16 softmax over 250 keys ~1.1 µs slower than fp16 (21.6 against
20.5 µs at 32 × 8 × 250 × 250), when torch.profiler (CUPTI) times the bf16 kernel faster (18.23
against 18.68 µs, session 22)? Written in session 22, run in session 23 on the H200: the gap is
~0.3 µs (fp16 20.13 / bf16 20.46 µs against torch.softmax; fp16 20.45 / bf16 20.75 µs against
each other in one case; CUPTI 18.44 / 18.57 µs), i.e. session 22's 1.1 µs was one-call spread.

The bench times calls over 20 µs one at a time between events, OASR's call and the peer's in
alternating order after a 1 ms spin (oasr_jit.bench.time_case). Hypotheses this separates:
- the kernel or its launch: then fp16 against bf16, both OASR, in one case, shows the gap;
- the peer: torch.softmax's output (16 MB, dirty in the 60 MB L2) is written back to DRAM during
  the call that follows it; then against a peer that does no GPU work the gap closes, and
  against torch it depends on torch's bf16 kernel.

Usage, from the repository root on a GPU machine:

    python packages/oasr-norm/benchmarks/experiments/softmax_one_call.py
"""

import torch

import oasr_norm
from oasr_jit.bench import Case, time_case

SHAPE = (32, 8, 250, 250)


def setup(dtype):
    def make():
        return {"x": torch.randn(SHAPE, device="cuda").to(dtype)}

    return make


def ours(i):
    return oasr_norm.softmax(i["x"])


def no_gpu_work(i):
    return i["x"]


def torch_softmax(i):
    return torch.softmax(i["x"], -1)


def timed(name, oasr, peer, make, reps=30):
    case = Case(name, "softmax", "fp16", "x".join(map(str, SHAPE)), make, oasr, peer, "peer")
    t = time_case(case, make(), reps=reps)
    print(f"{name:40s} {t.oasr_us:7.2f} us  vs  {t.peer_us:7.2f} us  ({t.method})")


def main() -> None:
    half, bf16 = setup(torch.float16), setup(torch.bfloat16)
    for dtype, make in (("fp16", half), ("bf16", bf16)):
        timed(f"{dtype} ours vs torch.softmax", ours, torch_softmax, make)
        timed(f"{dtype} ours vs no GPU work", ours, no_gpu_work, make)

    # Both dtypes in one case: the inputs dict carries both tensors.
    def both():
        return {"h": half()["x"], "b": bf16()["x"]}

    timed(
        "fp16 ours vs bf16 ours",
        lambda i: oasr_norm.softmax(i["h"]),
        lambda i: oasr_norm.softmax(i["b"]),
        both,
    )

    # CUPTI kernel durations, back to back
    from torch.profiler import ProfilerActivity, profile

    for dtype, make in (("fp16", half), ("bf16", bf16)):
        xs = [make()["x"] for _ in range(8)]
        for x in xs:
            oasr_norm.softmax(x)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(5):
                for x in xs:
                    oasr_norm.softmax(x)
            torch.cuda.synchronize()
        for event in prof.key_averages():
            if "softmax" in event.key:
                print(f"{dtype} CUPTI {event.key[:60]:60s} {event.device_time:8.2f} us avg")


if __name__ == "__main__":
    main()
