"""Argument checks shared by the CPU (`ctc`) and GPU (`ctc_cuda`) decoders: each raises
TypeError / ValueError naming the argument and the fix."""

from __future__ import annotations

import operator

import torch


def as_int(value, name: str) -> int:
    if isinstance(value, bool):
        raise TypeError(f"{name} must be an int, got bool")
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an int, got {type(value).__name__}") from None


def check_beam(beam_size, nbest, max_beam: int | None = None) -> tuple[int, int]:
    """(beam_size, nbest) with 1 <= nbest <= beam_size (<= max_beam, the GPU's limit)."""
    beam_size = as_int(beam_size, "beam_size")
    nbest = as_int(nbest, "nbest")
    if max_beam is not None and not 1 <= beam_size <= max_beam:
        raise ValueError(
            f"beam_size must be in [1, {max_beam}] on the GPU, got {beam_size}; for wider beams "
            "use the CPU decoder (ctc_prefix_beam_search)"
        )
    if beam_size < 1:
        raise ValueError(f"beam_size must be at least 1, got {beam_size}")
    if not 1 <= nbest <= beam_size:
        raise ValueError(f"nbest must be in [1, beam_size = {beam_size}], got {nbest}")
    return beam_size, nbest


def check_threshold(threshold) -> float | None:
    """A blank-skip probability in (0, 1], or None (skip no frame)."""
    if threshold is None:
        return None
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)):
        raise TypeError(f"blank_skip_threshold must be a float or None, got {threshold!r}")
    threshold = float(threshold)
    if not 0.0 < threshold <= 1.0:
        raise ValueError(
            f"blank_skip_threshold must be a probability in (0, 1], got {threshold}; "
            "pass None to skip no frame"
        )
    return threshold


def check_integer_dtype(lengths: torch.Tensor) -> None:
    if lengths.dtype.is_floating_point or lengths.dtype.is_complex or lengths.dtype == torch.bool:
        raise TypeError(f"lengths must hold integers, got dtype {lengths.dtype}")


def host_lengths(lengths, batch: int, num_frames: int) -> torch.Tensor:
    """lengths (None, a sequence of ints or an integer tensor) as a CPU int64 [B] tensor with
    0 <= lengths[b] <= T (None: all T)."""
    if lengths is None:
        return torch.full((batch,), num_frames, dtype=torch.int64)
    if isinstance(lengths, torch.Tensor):
        check_integer_dtype(lengths)
        out = lengths.detach().to("cpu", torch.int64)
    else:
        out = torch.tensor([as_int(n, "lengths[i]") for n in lengths], dtype=torch.int64)
    if out.dim() != 1 or out.shape[0] != batch:
        raise ValueError(f"lengths must be [B] with B = {batch}, got shape {tuple(out.shape)}")
    if batch:
        low, high = int(out.min()), int(out.max())
        if low < 0:
            raise ValueError(f"lengths must be >= 0, got {low} at index {int(out.argmin())}")
        if high > num_frames:
            raise ValueError(
                f"lengths must be <= T = {num_frames}, got {high} at index {int(out.argmax())}"
            )
    return out.contiguous()
