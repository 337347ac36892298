"""Alignment utilities (pure Python): token spans from a decoded path, words from SentencePiece
pieces, times in seconds.

Frames are encoder output frames; ``frame_shift_s`` is the time between two of them (0.04 s for
10 ms features after 4x subsampling, 0.06 s after 6x, 0.08 s after 8x). Spans are half-open,
``[start, end)`` in frames, so a span's times are ``start * frame_shift_s`` and
``end * frame_shift_s``.

Two sources of spans:

- `path_to_spans`: a frame-level path (one label per frame: the argmax path of greedy search, a
  forced alignment). Exact: each token spans its run of frames.
- `hypothesis_spans`: a beam-search `Hypothesis`, which carries each token's first frame only.
  A token spans from its first frame to the next token's first frame (the last one to the end of
  the utterance): the run plus the blanks after it, an upper bound of where it was emitted.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

__all__ = ["TokenSpan", "WordSpan", "group_words", "hypothesis_spans", "path_to_spans"]

#: SentencePiece's word-boundary mark (U+2581), at the start of a piece that begins a word.
WORD_BOUNDARY = "\u2581"


class TokenSpan(NamedTuple):
    """A token and its frames ``[start, end)``."""

    token: int
    start: int
    end: int

    def seconds(self, frame_shift_s: float = 0.04) -> tuple[float, float]:
        """(start, end) in seconds."""
        return self.start * frame_shift_s, self.end * frame_shift_s


class WordSpan(NamedTuple):
    """A word, its tokens, its frames ``[start, end)`` and its times in seconds."""

    word: str
    tokens: tuple[int, ...]
    start: int
    end: int
    start_s: float
    end_s: float


def _labels(path) -> list[int]:
    if hasattr(path, "tolist"):  # a torch tensor or numpy array
        if getattr(path, "ndim", 1) != 1:
            raise ValueError(f"path must be 1-D [T], got shape {tuple(path.shape)}")
        path = path.tolist()
    return [int(v) for v in path]


def path_to_spans(path, blank: int = 0) -> list[TokenSpan]:
    """Token spans of a frame-level CTC path.

    Runs of one label merge into one token (a repeated token needs a blank between its runs);
    blanks are dropped. ``[s.token for s in spans]`` is the CTC collapse of the path.

    Parameters
    ----------
    path : sequence of int or 1-D tensor
        [T] one label per frame, e.g. ``log_probs.argmax(-1)``.
    blank : int
        The blank label.

    Returns
    -------
    list of TokenSpan
        In order; ``end`` is one past the run's last frame.

    Raises
    ------
    ValueError
        A tensor path that is not 1-D.

    Examples
    --------
    >>> [tuple(s) for s in path_to_spans([0, 3, 3, 0, 3, 5, 5], blank=0)]
    [(3, 1, 3), (3, 4, 5), (5, 5, 7)]
    """
    labels = _labels(path)
    spans: list[TokenSpan] = []
    t = 0
    while t < len(labels):
        label, start = labels[t], t
        while t < len(labels) and labels[t] == label:
            t += 1
        if label != blank:
            spans.append(TokenSpan(label, start, t))
    return spans


def hypothesis_spans(
    tokens: Sequence[int], frames: Sequence[int], num_frames: int
) -> list[TokenSpan]:
    """Token spans of a hypothesis that carries first frames (`Hypothesis.frames`).

    Token i spans ``[frames[i], frames[i + 1])``, the last one ``[frames[-1], num_frames)``.

    Parameters
    ----------
    tokens, frames : sequence of int
        [L] token ids and their first frames (strictly increasing).
    num_frames : int
        Frames in the utterance (> the last first frame).

    Returns
    -------
    list of TokenSpan
        One per token, in order.

    Raises
    ------
    ValueError
        tokens and frames of different lengths, or frames not strictly increasing in
        [0, num_frames).

    Examples
    --------
    >>> hyp = oasr_decoder.ctc_greedy_search(log_probs)[0]  # doctest: +SKIP
    >>> hypothesis_spans(hyp.tokens, hyp.frames, log_probs.shape[1])  # doctest: +SKIP
    """
    tokens, frames = list(tokens), [int(f) for f in frames]
    if len(tokens) != len(frames):
        raise ValueError(f"tokens ({len(tokens)}) and frames ({len(frames)}) differ in length")
    if not frames:
        return []
    ends = [*frames[1:], int(num_frames)]
    for i, (start, end) in enumerate(zip(frames, ends, strict=True)):
        if not 0 <= start < end:
            raise ValueError(
                f"frames must increase strictly from 0 and stay below num_frames = {num_frames}: "
                f"token {i} starts at {start}, the next boundary is {end}"
            )
    return [TokenSpan(int(tok), s, e) for tok, s, e in zip(tokens, frames, ends, strict=True)]


def group_words(
    spans: Sequence[TokenSpan],
    pieces: Sequence[str] | Mapping[int, str],
    frame_shift_s: float = 0.04,
    *,
    word_boundary: str = WORD_BOUNDARY,
) -> list[WordSpan]:
    """Group token spans into words with the SentencePiece convention.

    A piece that starts with ``word_boundary`` ("▁") begins a word; any other piece continues the
    current word (or begins one at the start). The word's text is its pieces joined, the
    boundary marks removed; a word with no text (a lone "▁" at the end) is dropped. A word spans
    from its first token's start to its last token's end.

    Parameters
    ----------
    spans : sequence of TokenSpan
        From `path_to_spans` or `hypothesis_spans`.
    pieces : sequence of str or mapping int -> str
        The piece of each token id (``sp.id_to_piece(i)`` for every i).
    frame_shift_s : float
        Seconds per frame.
    word_boundary : str
        The mark that starts a word's first piece.

    Returns
    -------
    list of WordSpan
        In order, with frames ``[start, end)`` and times in seconds (``start_s``, ``end_s``)

    Raises
    ------
    ValueError
        frame_shift_s <= 0, or a token without a piece.

    Examples
    --------
    >>> spans = [TokenSpan(7, 0, 2), TokenSpan(9, 2, 3), TokenSpan(4, 5, 6)]
    >>> [w.word for w in group_words(spans, {7: "\u2581he", 9: "llo", 4: "\u2581you"})]
    ['hello', 'you']
    """
    if not frame_shift_s > 0:
        raise ValueError(f"frame_shift_s must be > 0, got {frame_shift_s}")
    words: list[WordSpan] = []
    current: list[tuple[TokenSpan, str]] = []

    def flush() -> None:
        if not current:
            return
        text = "".join(piece for _, piece in current).replace(word_boundary, "")
        if text:
            start, end = current[0][0].start, current[-1][0].end
            words.append(
                WordSpan(
                    text,
                    tuple(span.token for span, _ in current),
                    start,
                    end,
                    start * frame_shift_s,
                    end * frame_shift_s,
                )
            )
        current.clear()

    for span in spans:
        try:
            piece = pieces[span.token]
        except (IndexError, KeyError):
            raise ValueError(f"token {span.token} has no piece in the table") from None
        if piece.startswith(word_boundary):
            flush()
        current.append((span, piece))
    flush()
    return words
