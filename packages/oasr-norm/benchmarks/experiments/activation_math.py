"""Times activation_math.cu's variants against PyTorch and the production op on the same random
tensors, in one process (session 9). Usage, from the repository root, after building the .so
(see activation_math.cu):

    python packages/oasr-norm/benchmarks/experiments/activation_math.py /tmp/activation_math.so

Per case: 4 rotating input buffers past the L2, every arm timed in each of 9 rounds (arms
interleaved), each round a batch of 20 calls between CUDA events; the median round. Each variant's
output is compared with PyTorch's (elements that differ, the largest difference in ulps of the
dtype).
"""

import ctypes
import sys

import torch
import torch.nn.functional as F

import oasr_norm

FORMS = {  # op -> [(form id of activation_math.cu, name)]
    "gelu": [(0, "erff"), (1, "erfc form")],
    "tanh": [(2, "tanhf"), (3, "tanh.approx")],
}
PEERS = {"gelu": F.gelu, "tanh": torch.tanh}
OURS = {"gelu": oasr_norm.gelu, "tanh": oasr_norm.tanh}


def ulps(a: torch.Tensor, b: torch.Tensor) -> tuple[int, int]:
    """(elements that differ, largest distance in ulps) of two 16-bit tensors."""
    ia = a.view(torch.int16).to(torch.int32)
    ib = b.view(torch.int16).to(torch.int32)
    # sign-magnitude to a monotone integer line
    ia = torch.where(ia < 0, -(ia & 0x7FFF), ia)
    ib = torch.where(ib < 0, -(ib & 0x7FFF), ib)
    d = (ia - ib).abs()
    return int((d > 0).sum()), int(d.max())


def time_case(lib, shapes, op, xs, outs, did) -> None:
    n = xs[0].numel()
    stream = torch.cuda.current_stream().cuda_stream

    def variant(form, shape):
        def call(i):
            rc = lib.run_variant(did, form, shape, outs[i].data_ptr(), xs[i].data_ptr(), n, stream)
            assert rc == 0, rc

        return call

    arms = {"PyTorch": lambda i: PEERS[op](xs[i])}
    arms["oasr_norm (JIT)"] = lambda i: OURS[op](xs[i], out=outs[i])
    for form, fname in FORMS[op]:
        for shape, sname in enumerate(shapes):
            if shape == 0 and form % 2:
                continue  # the production launcher has the library's math only
            arms[f"{fname}, {sname}"] = variant(form, shape)
    ref = PEERS[op](xs[0])
    acc = {}
    for name, call in arms.items():
        if name != "PyTorch":
            outs[0].fill_(float("nan"))
            call(0)
            acc[name] = ulps(outs[0], ref)
    for call in arms.values():  # warm-up
        for i in range(8):
            call(i % 4)
    samples = {name: [] for name in arms}
    for _ in range(9):
        for name, call in arms.items():
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            for i in range(20):
                call(i % 4)
            end.record()
            end.synchronize()
            samples[name].append(start.elapsed_time(end) * 1000 / 20)
    med = {k: sorted(v)[4] for k, v in samples.items()}
    peer = med["PyTorch"]
    rows, cols = xs[0].shape
    print(
        f"\n{op} {str(xs[0].dtype)[6:]} {rows}x{cols} (copy of these bytes at 4.27 TB/s: "
        f"{4 * n / 4.27e6:.1f} us)"
    )
    for name, us in med.items():
        extra = ""
        if name != "PyTorch":
            extra = (
                f"  vs PyTorch {peer / us:5.3f}x, differs on {acc[name][0]} "
                f"(max {acc[name][1]} ulp)"
            )
        print(f"  {name:28s} {us:8.2f} us {4 * n / us / 1e3:6.0f} GB/s{extra}", flush=True)


def main(lib_path: str) -> None:
    lib = ctypes.CDLL(lib_path)
    lib.run_variant.argtypes = [
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_void_p,
        ctypes.c_void_p,
        ctypes.c_int64,
        ctypes.c_void_p,
    ]
    lib.shape_name.restype = ctypes.c_char_p
    shapes = [lib.shape_name(s).decode() for s in range(lib.num_shapes())]
    print(torch.cuda.get_device_name(), torch.__version__)
    for rows, cols in ((8000, 2048), (32000, 5120)):
        for dtype, did in ((torch.float16, 0), (torch.bfloat16, 1)):
            xs = [torch.randn(rows, cols, device="cuda", dtype=dtype) for _ in range(4)]
            outs = [torch.empty_like(x) for x in xs]
            for op in FORMS:
                time_case(lib, shapes, op, xs, outs, did)


if __name__ == "__main__":
    main(sys.argv[1])
