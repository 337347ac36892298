"""Experiment (session 18): where should bmm's small-N kernel (N <= 16, mma.sync on small tiles)
run instead of the general lane's 64 x 64 CUTLASS tile?

Times the small-N kernel (the module's ``_with`` export, choice -3), the CUTLASS general lane
(choice -2), what ``bmm`` runs (choice -1, named at the end of the line) and torch.matmul on the
same tensors, in one process, the way ``bmm_tiles.py`` does (a CUDA graph of 20 calls per arm,
replayed 9 times per round, arms interleaved, the median of 9 rounds; L2-warm). Every arm's
answer is checked against torch.matmul first. The shapes are Zipformer's attention weights ·
values (value heads of 12, T 250 to 1500) and larger products with N 16, to find where the small
tiles lose.

    python packages/oasr-gemm/benchmarks/experiments/bmm_small_n.py
"""

import os
import sys

import torch

from oasr_gemm import _jit
from oasr_gemm.batched import batch_views, bmm_lane

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bmm_tiles import interleaved_medians

# (label, L, M, K, N, B layout): weights · values at T 250 to 1500 (T odd: 2-byte loads), and
# larger products with N 16, to find where the MMAs on small tiles lose to the CUTLASS kernel
SHAPES = (
    ("attn.v T250 x64 N12", 64, 250, 250, 12, "b_row"),
    ("attn.v T249 x64 N12", 64, 249, 249, 12, "b_row"),
    ("attn.v T384 x48 N12", 48, 384, 384, 12, "b_row"),
    ("attn.v T500 x32 N12", 32, 500, 500, 12, "b_row"),
    ("attn.v T501 x32 N12", 32, 501, 501, 12, "b_row"),
    ("attn.v T750 x24 N12", 24, 750, 750, 12, "b_row"),
    ("attn.v T1000 x16 N12", 16, 1000, 1000, 12, "b_row"),
    ("attn.v T1500 x8 N12", 8, 1500, 1500, 12, "b_row"),
    ("attn.v T250 x64 N8", 64, 250, 250, 8, "b_row"),
    ("attn.v T250 x64 N16 bcol", 64, 250, 250, 16, "b_col"),
    ("attn.v T256 x64 N16 (tuned)", 64, 256, 256, 16, "b_row"),
    ("64 x 1024 x 128 x 8 (tuned)", 64, 1024, 128, 8, "b_row"),
    ("8 x 4000 x 1024 x 16", 8, 4000, 1024, 16, "b_row"),
    ("1 x 32000 x 512 x 16", 1, 32000, 512, 16, "b_row"),
    ("1 x 8000 x 250 x 12", 1, 8000, 250, 12, "b_row"),
    ("1 x 8000 x 130 x 12", 1, 8000, 130, 12, "b_row"),
    # the 32-column CTA: odd T (2-byte loads; CUTLASS's SIMT kernel), even T (4-byte loads;
    # CUTLASS's 2-element tensor-op loads)
    ("attn.v T249 x64 N32", 64, 249, 249, 32, "b_row"),
    ("attn.v T250 x64 N32", 64, 250, 250, 32, "b_row"),
    ("attn.v T501 x32 N24", 32, 501, 501, 24, "b_row"),
    ("attn.v T250 x64 N24 bcol", 64, 250, 250, 24, "b_col"),
    # the 64-column CTA (64 rows): heads of 64
    ("attn.v T249 x64 N64", 64, 249, 249, 64, "b_row"),
    ("attn.v T250 x64 N64", 64, 250, 250, 64, "b_row"),
    ("attn.v T501 x32 N64", 32, 501, 501, 64, "b_row"),
    ("attn.v T500 x32 N64", 32, 500, 500, 64, "b_row"),
    ("attn.v T249 x64 N48 bcol", 64, 249, 249, 48, "b_col"),
    ("attn.v T250 x64 N40 bcol", 64, 250, 250, 40, "b_col"),
)


def time_shape(module, dtype, label, L, M, K, N, layout) -> None:
    gen = torch.Generator(device="cuda").manual_seed(0)
    A = torch.randn(L, M, K, device="cuda", generator=gen).to(dtype)
    if layout == "b_row":
        B = (torch.randn(L, K, N, device="cuda", generator=gen) * K**-0.5).to(dtype)
    else:
        B = (torch.randn(L, N, K, device="cuda", generator=gen) * K**-0.5).to(dtype)
        B = B.transpose(-1, -2)
    _, a4, b4, found = batch_views(A, B)
    assert found == layout
    tag = "fp16" if dtype == torch.float16 else "bf16"
    fn = getattr(module, _jit.bmm_function_name(tag, layout) + "_with")
    want = torch.matmul(A.float(), B.float())
    out = torch.empty(L, M, N, device="cuda", dtype=dtype)
    out4 = out.view(a4.shape[0], a4.shape[1], M, N)
    arms = {"torch": lambda: torch.matmul(A, B, out=out)}
    for choice, name in [(-3, "small_n"), (-2, "cutlass"), (-1, "auto")]:
        out.fill_(float("nan"))
        fn(out4, a4, b4, choice)
        torch.testing.assert_close(out.float(), want, rtol=2e-2, atol=2e-2)
        arms[name] = lambda choice=choice: fn(out4, a4, b4, choice)
    med = interleaved_medians(arms)
    print(
        f"{tag} {label:29s} "
        + " ".join(f"{med[h]:10.2f}" for h in ("torch", "cutlass", "small_n", "auto"))
        + f"  small_n {med['torch'] / med['small_n']:.2f}x torch,"
        f" {med['cutlass'] / med['small_n']:.2f}x cutlass; auto {bmm_lane(A, B)}",
        flush=True,
    )


def main() -> None:
    module = _jit.bmm_module()
    print(torch.cuda.get_device_name(), torch.__version__)
    print(
        f"{'shape':34s} " + " ".join(f"{h:>10s}" for h in ("torch", "cutlass", "small_n", "auto"))
    )
    for dtype in (torch.float16, torch.bfloat16):
        for shape in SHAPES:
            time_shape(module, dtype, *shape)


if __name__ == "__main__":
    main()
