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
from .gemm import _DTYPE_TAGS, BACKENDS, check_out, require_cuda
from .gemm import _check_operand as _check

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
    """out[offsets[g]:offsets[g+1]] = A[offsets[g]:offsets[g+1]] · B[g]ᵀ for every group g
    (module docstring); ``backend``: "auto" or "oasr" run the kernel, "torch" the twin."""
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    _check(A, "A")
    _check(B, "B", A.dtype)
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
    for t, name in ((B, "B"), (offsets, "offsets")):
        if t.device != A.device:
            raise ValueError(f"{name} is on {t.device} but A is on {A.device}; move it")
    out_shape = (A.shape[0], N)
    check_out(out, out_shape, A)
    if check_offsets:
        check_offsets_values(offsets.tolist(), A.shape[0])
    if backend == "torch":
        return twins.group_gemm(A, B, offsets, out=out)
    require_cuda(A, "the group_gemm kernels")
    if out is None:
        out = torch.empty(out_shape, dtype=A.dtype, device=A.device)
    if K == 0:  # an empty sum: the exact answer, no kernel needed
        return out.zero_()
    workspace = torch.empty(
        _HEADER_BYTES + G * _BYTES_PER_GROUP, dtype=torch.uint8, device=A.device
    )
    _kernel(_DTYPE_TAGS[A.dtype])(out, A, B, offsets.contiguous(), workspace)
    return out


@functools.cache
def _kernel(dtype: str):
    """The exported function of one dtype, looked up once."""
    return getattr(_jit.group_module(), _jit.group_function_name(dtype))
