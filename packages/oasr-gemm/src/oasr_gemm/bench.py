"""Benchmark routines of the GEMM family: ``oasr bench gemm [--suite asr|quick]``.

Each case times an `oasr_gemm` op against what a PyTorch user runs today: ``F.linear`` (cuBLAS),
and ``F.silu`` / ``F.gelu`` after it for the fused epilogues, ``F.log_softmax`` after it for the CTC
head, on the ASR shapes of
docs/benchmarks.md (M = batch × frames, N × K from the model widths), fp16 and bf16.
``flops`` is 2·M·N·K; ``bytes_moved`` counts A, B, the bias and D once each.

`bmm` cases run Zipformer's attention products (the general lane) and a Conformer's with extents
that are multiples of 8 (op ``bmm_aligned``: the tuned lane) against ``torch.matmul`` on the same
views (shape ``<batch>x<M>x<K>x<N>``, batch dims joined by ``.``).

Importing this module is cheap: torch and the ops are imported inside the functions.
"""

from __future__ import annotations

DTYPES = ("fp16", "bf16")
#: (M, N, K) of plain projections (with their nn.Linear bias):
#: docs/benchmarks.md's PyTorch rows, Conformer (WeNet-S d 256, icefall-L d 512) QKV / FFN /
#: out-projections at 8000 and 32000 frames, FastConformer-XL d 1024, Whisper-large d 1280 (T 1500
#: × batch 32 = 48000 rows), a decode-sized M, and the logits of a 5000-piece CTC head (also suite
#: "ctc_head": the signatures `python -m oasr_gemm.tune --suite ctc_head` measures)
GEMM_SHAPES = (
    (8000, 2048, 256),
    (8000, 256, 256),
    (8000, 768, 256),
    (8000, 256, 2048),
    (32000, 1536, 512),
    (32000, 512, 2048),
    (16000, 4096, 1024),
    (16000, 1024, 4096),
    (48000, 3840, 1280),
    (48000, 1280, 5120),
    (64, 2048, 512),
    (8000, 5000, 256),
    (8000, 5000, 512),
)
#: (M, N, K, activation) of FFN up-projections with the activation fused
ACTIVATION_SHAPES = (
    (250, 2048, 256, "swish"),  # one utterance (WeNet-S FFN, T 250, batch 1)
    (8000, 2048, 256, "swish"),
    (32000, 2048, 512, "swish"),
    (16000, 4096, 1024, "swish"),
    (48000, 5120, 1280, "gelu"),
)
CTC_VOCABULARIES = (5000,)
#: CTC heads (M, V, K): docs/benchmarks.md's two rows and a 500-piece vocabulary
HEAD_SHAPES = (
    (8000, 500, 256),
    (8000, 5000, 256),
    (8000, 8404, 512),
)
#: Zipformer attention products (batch 16 × 4 heads, T 250): (label, A shape, B shape, whether B
#: is a K-contiguous view of [..., N, K])
BMM_SHAPES = (
    ("q.kT", (16, 4, 250, 32), (16, 4, 250, 32), True),  # scores; B = keys.transpose(-1, -2)
    ("attn.v", (16, 4, 250, 250), (16, 4, 250, 12), False),  # weights · values, head dim 12
    ("q.pos", (16, 4, 250, 4), (1, 4, 4, 499), False),  # position scores: dim 4, B broadcast
    # the tuned lane (extents multiples of 8): a Conformer layer's products at T 256, 8 heads of
    # 64, batch 16, and a long one (T 1024)
    ("q.kT aligned", (16, 8, 256, 64), (16, 8, 256, 64), True),
    ("attn.v aligned", (16, 8, 256, 256), (16, 8, 256, 64), False),
    ("q.kT aligned T1024", (4, 8, 1024, 64), (4, 8, 1024, 64), True),
)
#: group_gemm: per-group weights over ragged row counts (label, rows per group, N, K)
GROUP_SHAPES = (("8 adapters", (700, 1300, 900, 1100, 500, 1500, 1000, 1000), 512, 512),)
#: the fp16 cases of suite "quick" (docs/benchmarks.md's PyTorch rows)
QUICK = {
    ("gemm", (8000, 2048, 256)),
    ("gemm", (48000, 3840, 1280)),
    ("gemm_activation", (8000, 2048, 256)),
}


def routines(suite: str) -> list:
    """Every case in ``suite`` ("asr": the full grid; "quick": three fp16 cases)."""
    return [case for case in all_cases() if suite in case.suites]


def all_cases(device: str = "cuda") -> list:
    cases = []
    for dtype in DTYPES:
        cases += [_gemm_case(dtype, *shape, device=device) for shape in GEMM_SHAPES]
        cases += [
            _gemm_case(dtype, M, N, K, device=device, activation=act)
            for M, N, K, act in ACTIVATION_SHAPES
        ]
        cases += [_head_case(dtype, *shape, device=device) for shape in HEAD_SHAPES]
        cases += [_bmm_case(dtype, *shape, device=device) for shape in BMM_SHAPES]
        cases += [_group_case(dtype, *shape, device=device) for shape in GROUP_SHAPES]
    return cases


def _group_case(dtype: str, label: str, rows, N: int, K: int, *, device: str):
    from oasr_jit.bench import Case

    bounds = [0]
    for r in rows:
        bounds.append(bounds[-1] + r)

    def setup():
        import torch

        torch_dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}[dtype]
        A = torch.randn(bounds[-1], K, device=device).to(torch_dtype)
        B = (torch.randn(len(rows), N, K, device=device) * K**-0.5).to(torch_dtype)
        offsets = torch.tensor(bounds, dtype=torch.int32, device=device)
        return {"A": A, "B": B, "offsets": offsets}

    def oasr(i):
        import oasr_gemm

        return oasr_gemm.group_gemm(i["A"], i["B"], i["offsets"], check_offsets=False)

    def peer(i):  # what a PyTorch user writes: one F.linear per group (bounds known on the host)
        import itertools

        import torch
        import torch.nn.functional as F

        A, B = i["A"], i["B"]
        return torch.cat(
            [F.linear(A[lo:hi], B[g]) for g, (lo, hi) in enumerate(itertools.pairwise(bounds))]
        )

    total, G = bounds[-1], len(rows)
    shape = f"{G}x{total}x{N}x{K}"
    return Case(
        name=f"group_gemm {dtype} {shape} {label}",
        op="group_gemm",
        dtype=dtype,
        shape=shape,
        setup=setup,
        oasr=oasr,
        peer=peer,
        peer_name="F.linear per group + torch.cat",
        flops=2 * total * N * K,
        bytes_moved=2 * (total * K + G * N * K + total * N),
        suites={"asr"},
    )


def check_head(ours, theirs) -> None:
    """Log-probabilities of two GEMMs: a logit whose fp32 sum lies at a rounding boundary may
    round either way (the two add in different orders), which moves its log-probability by an
    ulp of the logit (0.016 fp16, 0.125 bf16 below 32) however small the log-probability."""
    import torch

    atol, rtol = (3e-2, 2e-3) if ours.dtype == torch.float16 else (2e-1, 1.6e-2)
    torch.testing.assert_close(ours.float(), theirs.float(), rtol=rtol, atol=atol)


def _head_case(dtype: str, M: int, V: int, K: int, *, device: str):
    from oasr_jit.bench import Case

    def setup():
        import torch

        torch_dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}[dtype]
        return {
            "A": torch.randn(M, K, device=device).to(torch_dtype),
            "B": (torch.randn(V, K, device=device) * 3 * K**-0.5).to(torch_dtype),
            "bias": (torch.randn(V, device=device) * 0.1).to(torch_dtype),
        }

    def oasr(i):
        import oasr_gemm

        return oasr_gemm.gemm_log_softmax(i["A"], i["B"], i["bias"])

    def peer(i):
        import torch.nn.functional as F

        return F.log_softmax(F.linear(i["A"], i["B"], i["bias"]), dim=-1)

    def ran(i):
        from .head import gemm_runs_kernels, pads_weight, runs_one_kernel
        from .selection import select_default_config

        if runs_one_kernel(i["A"], i["B"], i["bias"], None):
            return "one kernel (TMA + wgmma)"
        if not gemm_runs_kernels(i["A"], i["B"], i["bias"]):
            padded = pads_weight(M, V, i["bias"])
            return f"cuBLAS{', padded weight' if padded else ''} + rows"
        chosen = select_default_config("gemm", M, V, K, i["A"].dtype)
        return f"{chosen.config.id if chosen.config else 'cuBLAS'} ({chosen.tier}) + rows"

    shape = f"{M}x{V}x{K}"
    return Case(
        name=f"gemm_log_softmax {dtype} {shape}",
        check=check_head,
        op="gemm_log_softmax",
        dtype=dtype,
        shape=shape,
        setup=setup,
        oasr=oasr,
        peer=peer,
        peer_name="F.log_softmax(F.linear)",
        flops=2 * M * V * K,
        bytes_moved=2 * (M * K + V * K + V + M * V),
        suites={"asr"},
        ran=ran,
    )


def _bmm_case(dtype: str, label: str, a_shape, b_shape, b_transposed: bool, *, device: str):
    from oasr_jit.bench import Case

    def setup():
        import torch

        torch_dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}[dtype]
        K = a_shape[-1]
        A = torch.randn(a_shape, device=device).to(torch_dtype)
        if b_transposed:
            B = (torch.randn(b_shape, device=device) * K**-0.5).to(torch_dtype).transpose(-1, -2)
        else:
            B = (torch.randn(b_shape, device=device) * K**-0.5).to(torch_dtype)
        return {"A": A, "B": B}

    def oasr(i):
        import oasr_gemm

        return oasr_gemm.bmm(i["A"], i["B"])

    def peer(i):
        import torch

        return torch.matmul(i["A"], i["B"])

    def ran(i):
        from .selection import bmm_lane

        return bmm_lane(i["A"], i["B"])

    import math

    *batch, M, K = a_shape
    N = b_shape[-2] if b_transposed else b_shape[-1]
    problems = math.prod(batch)
    shape = f"{'.'.join(map(str, batch))}x{M}x{K}x{N}"
    return Case(
        name=f"bmm {dtype} {shape} {label}",
        # the bmm target is the general lane's, at Zipformer shapes: the aligned cases
        # (the tuned lane) get their own geometric mean
        op="bmm_aligned" if "aligned" in label else "bmm",
        dtype=dtype,
        shape=shape,
        setup=setup,
        oasr=oasr,
        peer=peer,
        peer_name="torch.matmul",
        flops=2 * problems * M * N * K,
        bytes_moved=2 * (math.prod(a_shape) + math.prod(b_shape) + problems * M * N),
        suites={"asr"},
        ran=ran,
    )


def _gemm_case(dtype: str, M: int, N: int, K: int, *, device: str, activation: str | None = None):
    from oasr_jit.bench import Case

    def setup():
        import torch

        torch_dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}[dtype]

        def randn(*shape, scale=1.0):
            return (torch.randn(shape, device=device) * scale).to(torch_dtype)

        # unit-variance outputs: B scaled by 1/sqrt(K)
        return {"A": randn(M, K), "B": randn(N, K, scale=K**-0.5), "bias": randn(N, scale=0.1)}

    def oasr(i):
        import oasr_gemm

        if activation is None:
            return oasr_gemm.gemm(i["A"], i["B"], i["bias"])
        return oasr_gemm.gemm_activation(i["A"], i["B"], i["bias"], activation=activation)

    def peer(i):
        import torch.nn.functional as F

        y = F.linear(i["A"], i["B"], i["bias"])
        if activation == "swish":
            return F.silu(y)
        if activation == "gelu":
            return F.gelu(y)
        return y

    op = "gemm" if activation is None else "gemm_activation"

    def ran(i):
        from .selection import select_default_config

        chosen = select_default_config(op, M, N, K, i["A"].dtype)
        return f"{chosen.config.id if chosen.config else 'cuBLAS'} ({chosen.tier})"

    shape = f"{M}x{N}x{K}"
    label = shape if activation is None else f"{shape}+{activation}"
    suites = {"asr"}
    if dtype == "fp16" and (op, (M, N, K)) in QUICK:
        suites.add("quick")
    if N in CTC_VOCABULARIES:
        suites.add("ctc_head")
    peer_name = {None: "F.linear", "swish": "F.silu(F.linear)", "gelu": "F.gelu(F.linear)"}
    return Case(
        name=f"{op} {dtype} {label}",
        op=op,
        dtype=dtype,
        shape=shape,
        setup=setup,
        oasr=oasr,
        peer=peer,
        peer_name=peer_name[activation],
        flops=2 * M * N * K,
        bytes_moved=2 * (M * K + N * K + M * N + N),
        suites=suites,
        ran=ran,
    )
