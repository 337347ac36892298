"""`group_gemm`: one launch for G GEMMs of different row counts (a segment GEMM).

A is ``[total, K]``: the rows of group g are ``A[offsets[g]:offsets[g + 1]]`` (ragged batches
concatenated, no padding). B is ``[G, N, K]``, one ``nn.Linear`` weight per group. The output
``[total, N]`` has each group's rows times its weight. fp16 or bf16, fp32 accumulation, on
CUTLASS 2.x's grouped kernel, whose problem sizes and pointers are filled on the device from
``offsets`` (int32, ``[G + 1]``, on A's device).

``check_offsets=True`` (the default) reads ``offsets`` back once to raise a clear ValueError for
bad ones; that is a device sync, which a CUDA graph cannot capture. With ``check_offsets=False``
nothing is read back: a group whose offsets are invalid is left empty (its rows unwritten).
"""

from __future__ import annotations

import functools

import torch

from oasr_jit import oasr_api

from . import _jit, twins
from ._checks import (
    DTYPE_TAGS,
    check_backend,
    check_operand,
    check_out,
    check_same_device,
    require_cuda,
)

#: bytes of the device arrays per group (6 pointers or leading dims and a GemmCoord), plus a
#: 16-byte header: group_gemm_sm80_template.cuh, GroupArrays::bytes
_HEADER_BYTES, _BYTES_PER_GROUP = 16, 6 * 8 + 12


def check_offsets_values(offsets: list[int], total: int) -> None:
    """ValueError unless ``offsets`` start at 0, never decrease and end at ``total``."""
    if offsets[0] != 0 or offsets[-1] != total:
        raise ValueError(
            f"offsets must start at 0 and end at A's row count {total}; got {offsets[0]} .. "
            f"{offsets[-1]}"
        )
    for g in range(len(offsets) - 1):
        if offsets[g + 1] < offsets[g]:
            raise ValueError(
                f"offsets decrease at group {g}: {offsets[g]} -> {offsets[g + 1]} (they are "
                "cumulative row counts)"
            )


@oasr_api
def group_gemm(
    A: torch.Tensor,
    B: torch.Tensor,
    offsets: torch.Tensor,
    *,
    out: torch.Tensor | None = None,
    check_offsets: bool = True,
    backend: str = "auto",
) -> torch.Tensor:
    """One launch for G GEMMs of different row counts (a segment GEMM), one weight per group.

    ``out[offsets[g]:offsets[g+1]] = A[offsets[g]:offsets[g+1]] · B[g]ᵀ`` for every group g,
    fp32 accumulation, one rounding to A's dtype: e.g. per-language or per-expert output
    layers over ragged batches concatenated without padding.

    Parameters
    ----------
    A : torch.Tensor
        ``[total, K]``, float16 or bfloat16; group g's rows are ``offsets[g]:offsets[g+1]``.
    B : torch.Tensor
        ``[G, N, K]``, A's dtype and device: G ``nn.Linear`` weights.
    offsets : torch.Tensor
        int32 ``[G + 1]`` on A's device: cumulative row counts, 0 first, ``total`` last, never
        decreasing (an empty group is fine).
    out : torch.Tensor, optional
        ``[total, N]`` contiguous, A's dtype and device; must not overlap A or B.
    check_offsets : bool
        True (default) reads ``offsets`` back once to raise a clear ValueError for bad ones: a
        device sync, which a CUDA graph cannot capture. False reads nothing back; a group whose
        offsets are invalid is then left empty (its rows unwritten).
    backend : {"auto", "oasr", "torch"}
        "auto" (default) and "oasr" run the kernel (CUTLASS 2.x grouped GEMM, its problem
        sizes filled on the device from ``offsets``). "torch" runs the twin
        (``oasr_gemm.twins.group_gemm``: one ``F.linear`` per group) on any device.

    Returns
    -------
    torch.Tensor
        ``[total, N]`` in A's dtype (``out`` when given).

    Raises
    ------
    TypeError
        Non-tensors, a dtype other than float16 / bfloat16 (int32 for ``offsets``), mixed
        dtypes.
    ValueError
        Shapes (A not 2-D, B not 3-D, K mismatch, ``offsets`` not ``[G + 1]``, G = 0), bad
        offsets (with ``check_offsets``), a bad ``out``, tensors on different devices, a CPU
        tensor without ``backend="torch"``, an unknown ``backend``.

    Equivalent to ``torch.cat([F.linear(A[o[g]:o[g+1]], B[g]) for g in range(G)])`` with
    ``o = offsets.tolist()``.

    Examples
    --------
    >>> lens = [120, 0, 333]  # rows per group
    >>> A = torch.randn(sum(lens), 512, device="cuda", dtype=torch.float16)
    >>> B = torch.randn(3, 256, 512, device="cuda", dtype=torch.float16)
    >>> offsets = torch.tensor([0, 120, 120, 453], dtype=torch.int32, device="cuda")
    >>> out = oasr_gemm.group_gemm(A, B, offsets)  # [453, 256]
    """
    check_backend(backend)
    check_operand(A, "A")
    check_operand(B, "B", A.dtype)
    if not isinstance(offsets, torch.Tensor) or offsets.dtype != torch.int32:
        raise TypeError("offsets must be an int32 tensor of G + 1 cumulative row counts")
    if A.dim() != 2 or B.dim() != 3:
        raise ValueError(
            f"A must be [total, K] and B [G, N, K]; got {tuple(A.shape)} and {tuple(B.shape)}"
        )
    G, N, K = B.shape
    if A.shape[1] != K:
        raise ValueError(f"A {tuple(A.shape)} and B {tuple(B.shape)} differ in K")
    if G < 1 or tuple(offsets.shape) != (G + 1,):
        raise ValueError(f"offsets must be [G + 1] = [{G + 1}] for G = {G} groups (G >= 1)")
    check_same_device(B, "B", A)
    check_same_device(offsets, "offsets", A)
    out_shape = (A.shape[0], N)
    check_out(out, out_shape, A)
    if check_offsets:
        check_offsets_values(offsets.tolist(), A.shape[0])
    if backend == "torch":
        return twins.group_gemm(A, B, offsets, out=out)
    require_cuda(A)
    if out is None:
        out = torch.empty(out_shape, dtype=A.dtype, device=A.device)
    if K == 0:  # an empty sum: the exact answer, no kernel needed
        return out.zero_()
    workspace = torch.empty(
        _HEADER_BYTES + G * _BYTES_PER_GROUP, dtype=torch.uint8, device=A.device
    )
    _kernel(DTYPE_TAGS[A.dtype])(out, A, B, offsets.contiguous(), workspace)
    return out


@functools.cache
def _kernel(dtype: str):
    """The exported function of one dtype, looked up once."""
    return getattr(_jit.group_module(), _jit.group_function_name(dtype))
