"""`gemm_log_softmax`: the CTC head, log_softmax(A · Bᵀ + C) over the vocabulary.

One kernel on sm90 for V <= 256, and for V <= 512 from 2000 rows (`runs_one_kernel`;
``include/oasr/gemm/log_softmax_head_kernel_sm90.cuh``): a CTA holds 64 rows' logits for the whole
vocabulary in registers, so the logits never leave the SM and the output is written once. Like every
route, it rounds the logits to A's dtype before the softmax, as PyTorch does; a logit whose fp32 sum
lies at a rounding boundary may round the other way than in the two passes (their GEMM adds in
another order), so at 256 < V <= 512 a row can differ by a logit's ulp between a call under 2000
rows and one over.

For 512 < V <= 12288 and K <= 512, the cluster head (`runs_cluster_head`;
``include/oasr/gemm/log_softmax_cluster_kernel_sm90.cuh``) spreads a 64-row block's vocabulary over
a cluster of up to 16 CTAs, each parking its slice of the rounded logits in shared memory; the row's
max and sum are merged across the cluster, and each CTA writes its slice of the output once. It is
taken where it beats the two passes (`cluster_head_wins`: odd vocabularies up to 3072 at K <= 256
from 5M to 9M outputs, up to 1100 at K <= 512 from 1.5M to 9M); at an aligned V 5000 it runs
0.7-0.8x of them.

Both fused heads are launched as programmatic dependents of the kernel before them: they set up
while it finishes and read nothing before it is complete (``griddepcontrol.wait``).

Otherwise two passes: the GEMM writes the logits (into the output, or a padded buffer for an odd V),
then a row pass (``oasr/common/softmax.cuh``, the kernels of oasr-norm's softmax) reads each row
once (into registers up to V = 16384) and writes its log_softmax once. PyTorch's
``F.log_softmax(F.linear(...))`` moves as many bytes; what differs is the row kernel and the
odd-V GEMM (docs/gemm.md, "gemm_log_softmax").

The GEMM pass is `gemm`'s when the sm90 kernels can take the shape (K and V multiples of 8,
operands TMA can read): the kernel `select_default_config` chooses (cuBLAS where the tuning data
says so). Otherwise cuBLAS (``torch.addmm``) computes the logits into the output, and the row
pass runs on it in place. For an odd vocabulary (V = 500, 1025, 8404: not a multiple of 8)
cuBLAS is up to 5x slower than at the next multiple of 8, so there (past `PAD_MIN_VOCAB` and
`PAD_MIN_OUTPUTS`) the GEMM runs against a copy of the weight padded with zero rows (V·K elements
copied per call) into a buffer with padded rows, and the row pass reads the first V columns of
each row from it (a matrix C keeps the in-place path). Whatever V, it reads the padded rows in
16-byte vectors and realigns them across lanes to out's rows, which start anywhere within 16
bytes, so that its stores are 16 bytes wide too (oasr-jit's ``PaddedDenseRow``).
"""

from __future__ import annotations

import functools
import math

import torch
import torch.nn.functional as F

from oasr_jit import oasr_api

from . import _jit, twins
from ._checks import as_rows, check_gemm_args, check_tma, require_cuda
from .dense import _gemm

#: The one-kernel head's largest vocabulary: a CTA keeps 64 rows x 512 fp32 logits in registers.
HEAD_MAX_VOCAB = 512
#: With an even V > 256 it takes a call from this many rows (M) on; below, the two passes are as
#: fast or faster: one CTA's chain (TMA, the K loop, the row reductions, the stores) is 8-16 µs
#: however few its rows. V <= 256 wins at every M measured. H200, fp16, against the two passes
#: (benchmarks/log_softmax_head.py): V 500 0.64-0.85x at 64-301 rows, 0.92-1.05x at 1000,
#: 1.08-1.35x at 2000, 1.7-2.3x at 8000-32000; V 33 and 255 0.89-3.0x from 64 rows; docs/gemm.md.
HEAD_MIN_ROWS = 2000
#: An odd V > 256 from this many rows: cuBLAS is slow at an odd N, so the head wins from fewer.
#: H200, fp16, CUDA graphs, against the two passes (whose row pass reads those rows in 16-byte
#: vectors): at 700 rows 1.07-1.31x at V 257, 301, 319, 383, 501 and 511 (K 512), 0.96-0.98x at
#: 449 and 511 (K 256); at 500 rows 0.79-0.95x but V 301 (1.05x); at 1000 rows 1.29-1.53x.
HEAD_MIN_ROWS_ODD_VOCAB = 700

#: The cluster head (``include/oasr/gemm/log_softmax_cluster_kernel_sm90.cuh``) spreads a row
#: block's vocabulary over a cluster of up to 16 CTAs, each holding its slice of the logits in
#: shared memory beside A's rows (K <= 512) and a ring of B's: V up to 12288 fits at any such K.
CLUSTER_MAX_VOCAB = 12288
CLUSTER_MAX_K = 512


def cluster_head_wins(M: int, V: int, K: int) -> bool:
    """Where the cluster head beats the two passes (H200, ``benchmarks/log_softmax_head.py
    --cluster``, fp16 and bf16, against the two passes with the padded weight from
    `PAD_MIN_OUTPUTS`; docs/gemm.md): a band of sizes, for odd vocabularies only. Its
    chain of TMA loads from L2 costs ~25-35 µs however few the rows, and past the band its time
    per output is above the two passes'. At K <= 256, V <= 3072 from 5M to 9M outputs (8000
    rows of V 1025 1.13x, 4000 of V 2047 1.11x, 2000 of V 3001 1.30x); at K <= 512, V <= 1100
    from 1.5M to 9M (2000-8000 rows of V 1025: 1.06-1.35x). Outside it 0.44-0.98x, apart from
    a few points within 8% either way; an aligned V 5000 0.68-0.82x."""
    if V % 8 == 0 or M * V > 9_000_000:
        return False
    if K <= 256:
        return V <= 3072 and M * V >= 5_000_000
    return K <= 512 and V <= 1100 and M * V >= 1_500_000


@functools.cache
def _is_sm90(device: torch.device) -> bool:
    return torch.cuda.get_device_capability(device)[0] == 9


def _fused_operands(
    A: torch.Tensor, B: torch.Tensor, C: torch.Tensor | None, out: torch.Tensor | None
) -> bool:
    """What both fused heads need: a CUDA call on sm90, K a positive multiple of 8, A's rows
    and B readable by TMA (16-byte start and row stride), C absent or a bias vector, ``out``
    (when given) starting on 16 bytes."""
    K = B.shape[1]
    if A.device.type != "cuda" or not (K > 0 and K % 8 == 0):
        return False
    if C is not None and (C.dim() != 1 or not C.is_contiguous()):
        return False
    if out is not None and out.data_ptr() % 16 != 0:
        return False
    if not _is_sm90(A.device):
        return False
    try:
        check_tma(as_rows(A, "A"), "A", "K")
    except ValueError:
        return False
    return B.is_contiguous() and B.data_ptr() % 16 == 0


def runs_one_kernel(
    A: torch.Tensor, B: torch.Tensor, C: torch.Tensor | None, out: torch.Tensor | None
) -> bool:
    """Whether the one-kernel head takes this call: V <= `HEAD_MAX_VOCAB` (from
    `HEAD_MIN_ROWS` rows when V > 256, `HEAD_MIN_ROWS_ODD_VOCAB` when V is also odd) and the
    operands `_fused_operands` names."""
    V = B.shape[0]
    if not 0 < V <= HEAD_MAX_VOCAB:
        return False
    min_rows = HEAD_MIN_ROWS_ODD_VOCAB if V % 2 else HEAD_MIN_ROWS
    if V > 256 and math.prod(A.shape[:-1]) < min_rows:
        return False
    return _fused_operands(A, B, C, out)


def runs_cluster_head(
    A: torch.Tensor, B: torch.Tensor, C: torch.Tensor | None, out: torch.Tensor | None
) -> bool:
    """Whether the cluster head takes this call: `HEAD_MAX_VOCAB` < V <= `CLUSTER_MAX_VOCAB`,
    K <= `CLUSTER_MAX_K`, where `cluster_head_wins`, with the operands `_fused_operands`
    names."""
    V, K = B.shape
    if not (HEAD_MAX_VOCAB < V <= CLUSTER_MAX_VOCAB and K <= CLUSTER_MAX_K):
        return False
    if not cluster_head_wins(math.prod(A.shape[:-1]), V, K):
        return False
    return _fused_operands(A, B, C, out)


def gemm_runs_kernels(A: torch.Tensor, B: torch.Tensor, C: torch.Tensor | None) -> bool:
    """Whether the sm90 GEMM kernels can compute these logits (else cuBLAS does)."""
    if B.shape[0] % 8 != 0:
        return False
    try:
        check_tma(as_rows(A, "A"), "A", "K")
        check_tma(B, "B", "K")
        if C is not None and C.dim() != 1:
            check_tma(as_rows(C, "C"), "C", "N")
    except ValueError:
        return False
    return True


@oasr_api
def gemm_log_softmax(
    A: torch.Tensor,
    B: torch.Tensor,
    C: torch.Tensor | None = None,
    *,
    out: torch.Tensor | None = None,
    backend: str = "auto",
) -> torch.Tensor:
    """The CTC head: log_softmax(A · Bᵀ + C) over the vocabulary, fused where it pays.

    ``out[m, v] = z[m, v] - log(sum_u exp(z[m, u]))`` with ``z = A · Bᵀ + C`` rounded to A's
    dtype (as PyTorch rounds its logits), the max and sum in fp32. A's leading dims are the
    M rows (B·T frames of an encoder), B the output projection, V its vocabulary.

    Parameters
    ----------
    A : torch.Tensor
        ``[..., K]`` (e.g. ``[B, T, K]``), float16 or bfloat16; a unit stride along K.
    B : torch.Tensor
        ``[V, K]``, A's dtype and device: the ``nn.Linear`` weight. Any V and K (the route
        picks a kernel that takes them).
    C : torch.Tensor, optional
        A bias ``[V]`` or a matrix ``[..., V]``; A's dtype and device.
    out : torch.Tensor, optional
        ``[..., V]`` contiguous, A's dtype and device; written and returned.
    backend : {"auto", "oasr", "torch"}
        "auto" (default): the fused one-kernel head (sm90, V <= 256, or V <= 512 from 700 rows
        at an odd V, 2000 at an even one), the cluster head (512 < V <= 12288, K <= 512, where
        measured faster), else two passes (a GEMM, OASR's where the sm90 kernels take the shape
        or cuBLAS otherwise, then one row pass). "oasr": OASR's kernels only (a fused head where
        the route takes one, else the sm90 GEMM, which needs V and K multiples of 8). "torch":
        the PyTorch twin (``oasr_gemm.twins.gemm_log_softmax``) on any device, CPU included.

    Returns
    -------
    torch.Tensor
        Log-probabilities ``[..., V]`` in A's dtype (``out`` when given).

    Raises
    ------
    TypeError
        Non-tensors, a dtype other than float16 / bfloat16, mixed dtypes.
    ValueError
        Mismatched shapes (K, the bias length, ``out``), tensors on different devices, a CPU
        tensor without ``backend="torch"``, an unknown ``backend``; with ``backend="oasr"``, a
        shape the sm90 GEMM cannot take (V or K not a multiple of 8). Messages name the fix.

    Notes
    -----
    At 256 < V <= 512 a row can differ by a logit's ulp between a call under 2000 rows (two
    passes) and one over (the fused head): the GEMMs add in different orders and a logit at a
    rounding boundary may round the other way.

    Equivalent to ``torch.log_softmax(torch.nn.functional.linear(A, B, C), dim=-1)``.

    Examples
    --------
    >>> enc = torch.randn(16, 250, 512, device="cuda", dtype=torch.float16)  # [B, T, K]
    >>> w = torch.randn(500, 512, device="cuda", dtype=torch.float16)  # [V, K]
    >>> log_probs = oasr_gemm.gemm_log_softmax(enc, w)  # [16, 250, 500]
    >>> ref = oasr_gemm.gemm_log_softmax(enc.cpu(), w.cpu(), backend="torch")
    """
    check_gemm_args(A, B, C, out, backend)
    if backend == "torch":
        return twins.gemm_log_softmax(A, B, C, out=out)
    require_cuda(A)
    M, V = math.prod(A.shape[:-1]), B.shape[0]
    if runs_one_kernel(A, B, C, out):
        if out is None:
            out = torch.empty((*A.shape[:-1], V), dtype=A.dtype, device=A.device)
        _head()(out.view(M, V), as_rows(A, "A"), B, C)
        return out
    if runs_cluster_head(A, B, C, out):
        if out is None:
            out = torch.empty((*A.shape[:-1], V), dtype=A.dtype, device=A.device)
        _cluster_head()(out.view(M, V), as_rows(A, "A"), B, C, 0)
        return out
    if backend == "oasr" or gemm_runs_kernels(A, B, C):
        out = _gemm(A, B, C, "identity", out, False, backend, "gemm")
        logits = out.view(M, V)
    else:
        out, logits = _cublas_logits(A, B, C, out)
    if out.numel():
        _row_pass()(out.view(M, V), logits)
    return out


#: An odd V's GEMM runs against the padded weight from this vocabulary and this many outputs
#: (M·V) on. H200, the two passes padded against unpadded (the row pass reads the padded logits
#: in 16-byte vectors), heads off: padding wins 1.02-1.8x at V 601 from 250 rows, 1.28-2.8x at
#: V 1025-5001 and 1.18-1.75x at V 8404 from 1000 rows, 1.02-1.5x at 500 rows of V 1025-5001;
#: it lost at 250 x 1025 x 256 fp16 (0.83x: under the output bar) and 500 x 8404 x 512
#: (0.86-0.91x, where cuBLAS's odd-N kernel is faster than at 250 rows).
#: V <= 512 is the one-kernel head's from 2000 rows (an odd V from `HEAD_MIN_ROWS_ODD_VOCAB`);
#: below, unmeasured, it stays unpadded (at V 500, 8000 rows, padding cost 0.93x).
PAD_MIN_VOCAB = 600
PAD_MIN_OUTPUTS = 1 << 18
#: Past this vocabulary the weight is padded to a multiple of 32 rows, not 8: cuBLAS then runs
#: 1.06-1.18x faster at V 8404 and 10001 (8000 x 8404 x 512: 135.6 against 143.6 µs fp16), and
#: at V 5001 from 32000 rows; at V 2047-3001 it is the same, at V 1025 up to 7% slower (H200,
#: cuBLAS into logits padded to 8 against 32 columns, V 1025-10001, 2000-32000 rows).
PAD_WIDE_VOCAB = 4096


def padded_vocab(V: int) -> int:
    """The padded GEMM's columns: V rounded up to 8, or past `PAD_WIDE_VOCAB` to 32."""
    multiple = 32 if V > PAD_WIDE_VOCAB else 8
    return -(-V // multiple) * multiple


def pads_weight(M: int, V: int, C: torch.Tensor | None) -> bool:
    """Whether the cuBLAS route runs against the weight padded to a multiple of 8 rows: an odd V
    past `PAD_MIN_VOCAB` and `PAD_MIN_OUTPUTS`, with no matrix C (a bias pads along)."""
    return (
        V % 8 != 0
        and (C is None or C.dim() == 1)
        and V >= PAD_MIN_VOCAB
        and M * V >= PAD_MIN_OUTPUTS
    )


def _cublas_logits(A, B, C, out, pad: bool | None = None):
    """A · Bᵀ + C by cuBLAS as ``(out, logits)``, the logits in the first V columns of each
    row of ``logits`` [M, W]: ``out`` itself (new when None; W = V), or (``pad``; by default
    `pads_weight`) a GEMM against the weight padded with zero rows to W (`padded_vocab`), which
    cuBLAS runs up to 5x faster than one with such an N. (The sm90 kernels on the padded
    operands were slower at 8000 x 8404 x 512: 151-159 µs against cuBLAS's 141-145.)"""
    V, K = B.shape
    M = math.prod(A.shape[:-1])
    if K == 0 and M and V:
        raise ValueError("K is 0: the product is empty; use backend='torch' for D = C")
    if pad is None:
        pad = pads_weight(M, V, C)
    if out is None and not pad and (C is None or C.dim() == 1):
        # one torch call that allocates: no out to check for overlap. Eager, the Python around
        # the call is most of a small head's time (H200, eager back-to-back calls: 30 µs this
        # way, 50-56 µs allocating out and checking it against every operand first)
        out = F.linear(A, B, C)
        return out, out.view(M, V)
    if out is None:
        out = torch.empty((*A.shape[:-1], V), dtype=A.dtype, device=A.device)
    if not pad:
        return out, twins.gemm(A, B, C, out=out).view(M, V)
    padded = padded_vocab(V)
    a2d = A.reshape(M, K)
    logits = torch.empty(M, padded, dtype=A.dtype, device=A.device)
    b_padded = F.pad(B, (0, 0, 0, padded - V))
    if C is None:
        torch.mm(a2d, b_padded.t(), out=logits)
    else:
        torch.addmm(F.pad(C, (0, padded - V)), a2d, b_padded.t(), out=logits)
    return out, logits


@functools.cache
def _head():
    """The exported one-kernel head, looked up once."""
    return _jit.head_module().log_softmax_head_sm90


@functools.cache
def _cluster_head():
    """The exported cluster head, looked up once."""
    return _jit.head_module().log_softmax_cluster_sm90


@functools.cache
def _row_pass():
    """The exported row pass, looked up once."""
    return _jit.log_softmax_module().log_softmax_rows


__all__ = [
    "cluster_head_wins",
    "gemm_log_softmax",
    "gemm_runs_kernels",
    "padded_vocab",
    "runs_cluster_head",
    "runs_one_kernel",
]
