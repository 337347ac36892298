"""Where the 16-bit GELU's table kernel starts to pay (session 22): the table kernel (forced,
`gelu_table`), what `oasr_norm.gelu` runs (the erff kernel below 4M elements, the table kernel
from 4M) and F.gelu, on random normal fp16 tensors from 64K to 16M elements, timed by the bench
harness (oasr_jit.bench.time_case: interleaved medians, graph replays under 20 us, inputs
rotated past L2). Usage, from the repository root on a GPU machine:

    python packages/oasr-norm/benchmarks/experiments/gelu_table_sizes.py

H200, session 22, µs (the first run timed the erff kernel directly, before the launcher chose):

    elements      table (smem)   L1 gather   erff kernel
    64x1024           3.87          2.34         1.77
    250x2048          4.67          4.18         2.88
    512x2048          4.91          5.17         3.61
    1000x2048         5.69          7.45         5.06
    2000x2048         7.23         11.13         7.28
    8000x2048        20.96         35.39        24.35

So the launcher takes the table from 4M elements (kGeluTableMinElements); the L1-gather kernel
(the table read from global memory) was dropped.
"""

import torch

import oasr_norm
from oasr_jit.bench import Case, time_case
from oasr_norm import _jit


def main() -> None:
    mod = _jit.module("activation")
    shapes = ((64, 1024), (250, 2048), (512, 2048), (1000, 2048), (2000, 2048), (8000, 2048))
    for rows, cols in shapes:

        def setup(rows=rows, cols=cols):
            x = torch.randn(rows, cols, device="cuda").half()
            return {"x": x, "out": torch.empty_like(x)}

        def table(i):
            mod.gelu_table(i["out"], i["x"])
            return i["out"]

        def ours(i):
            return oasr_norm.gelu(i["x"], out=i["out"])

        def torch_gelu(i):
            return torch.nn.functional.gelu(i["x"])

        first = setup()
        times = {}
        for name, a, b in (("table vs gelu", table, ours), ("gelu vs torch", ours, torch_gelu)):
            shape = f"{rows}x{cols}"
            case = Case(f"{name} {shape}", "gelu", "fp16", shape, setup, a, b, "x")
            t = time_case(case, first, reps=15)
            times[name] = (t.oasr_us, t.peer_us)
        (table_us, gelu_us), (gelu2_us, torch_us) = times["table vs gelu"], times["gelu vs torch"]
        print(
            f"{rows:5d}x{cols:<5d} {rows * cols / 1e6:6.2f} M: table {table_us:7.2f}  "
            f"oasr_norm.gelu {gelu_us:7.2f} / {gelu2_us:7.2f}  F.gelu {torch_us:7.2f} us"
        )


if __name__ == "__main__":
    main()
