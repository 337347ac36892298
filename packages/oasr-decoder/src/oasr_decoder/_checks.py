"""Argument checks shared by the CPU (`ctc`) and GPU (`ctc_cuda`) decoders: each raises
TypeError / ValueError naming the argument and the fix."""

from __future__ import annotations

import operator
import warnings

import torch

from oasr_jit.checks import check_tensor


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
            "decode a CPU tensor (ctc_prefix_beam_search(log_probs.cpu(), ...))"
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


def check_log_probs(log_probs, layout: str, *, device_type: str, dtypes, elsewhere: str) -> None:
    """log_probs is a `device_type` tensor of `dtypes` with the dims of `layout` ("[B, T, V]"),
    a non-empty vocabulary and a unit stride over V."""
    check_tensor(
        log_probs,
        "log_probs",
        dtypes=dtypes,
        device_type=device_type,
        elsewhere=elsewhere,
        shape_hint=layout,
    )
    ndim = len(layout.split(","))
    if log_probs.dim() != ndim:
        raise ValueError(f"log_probs must be {layout}, got shape {tuple(log_probs.shape)}")
    if log_probs.shape[-1] < 1:
        raise ValueError("log_probs has an empty vocabulary (V = 0)")
    if log_probs.shape[-1] > 1 and log_probs.stride(-1) != 1:
        raise ValueError(
            f"log_probs must have a unit stride over V, got strides {log_probs.stride()}; "
            "call .contiguous()"
        )


#: |logsumexp| of a first frame beyond which log_probs are taken for logits (warned about)
NORMALIZATION_TOLERANCE = 0.1


def warn_if_not_normalized(first_frames: torch.Tensor, what: str = "log_probs") -> None:
    """Warn (UserWarning; Python shows it once per call site) when a row of first_frames [R, V]
    (the first frame of each utterance) is not a log-probability distribution: its logsumexp is
    farther than NORMALIZATION_TOLERANCE from 0, as for raw logits. NaN and all -inf rows are
    left to the decoders' own errors."""
    if first_frames.numel() == 0:
        return
    lse = torch.logsumexp(first_frames.float(), dim=-1)
    lse = lse[torch.isfinite(lse)]
    if lse.numel() == 0:
        return
    worst = float(lse.abs().max())
    if worst > NORMALIZATION_TOLERANCE:
        warnings.warn(
            f"{what} does not look like log-probabilities: a first frame's logsumexp is "
            f"{worst:+.3g}, not 0 (raw logits?); pass log_softmax(logits, dim=-1), or scores "
            "are not log-probabilities",
            UserWarning,
            stacklevel=4,
        )
