"""What a new user meets first (CPU, no GPU): raw logits warned about, a frame with no finite
log-prob refused the same way by every decoder, errors that name the argument as given, and
docstrings that ``help()`` can show. (The ``bench`` extra is a checkout test: tests/.)"""

from __future__ import annotations

import inspect
import math
import warnings

import pytest
import torch

import oasr_decoder as dec
from oasr_decoder._family import OPS


def _log_probs(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).log_softmax(-1)


def _decoders():
    """Every CPU decoder, as a call on a [B, T, V] batch."""

    def stream(lp):
        decoder = dec.CtcStreamingDecoder(beam_size=4)
        decoder.accept(lp[0])
        return decoder.final_result()

    return {
        "greedy": lambda lp: dec.ctc_greedy_search(lp),
        "beam": lambda lp: dec.ctc_prefix_beam_search(lp, beam_size=4),
        "greedy class": lambda lp: dec.CtcGreedySearch()(lp[0]),
        "beam class": lambda lp: dec.CtcPrefixBeamSearch(beam_size=4)(lp[0]),
        "stream": stream,
    }


@pytest.mark.parametrize("name", list(_decoders()))
def test_raw_logits_warn(name):
    """logsumexp of a first frame far from 0 (raw logits: a score of +3022) warns; real
    log-probabilities do not."""
    call = _decoders()[name]
    logits = 8.0 * torch.randn(1, 20, 30, generator=torch.Generator().manual_seed(1))
    with pytest.warns(UserWarning, match="does not look like log-probabilities"):
        call(logits)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        call(_log_probs(1, 20, 30))
        call(_log_probs(1, 20, 30).half().float())  # rounding is not a reason to warn


@pytest.mark.parametrize("name", list(_decoders()))
def test_a_frame_that_is_minus_inf_everywhere_is_refused_by_every_decoder(name):
    lp = _log_probs(1, 6, 5)
    lp[0, 3] = -math.inf
    where = "at a frame of this stream" if name == "stream" else "at frame 3"
    with pytest.raises(ValueError, match=f"is -inf for every token {where}"):
        _decoders()[name](lp)


def test_padding_frames_are_neither_warned_about_nor_refused():
    lp = _log_probs(2, 6, 5)
    lp[1] = -math.inf  # utterance 1 has no frame
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert dec.ctc_greedy_search(lp, [6, 0])[1].tokens == ()
        assert dec.ctc_prefix_beam_search(lp, [6, 0])[1][0].tokens == ()


@pytest.mark.parametrize("search", [dec.CtcGreedySearch(), dec.CtcPrefixBeamSearch(beam_size=3)])
def test_single_utterance_errors_name_log_probs_as_given(search):
    lp = _log_probs(7, 5)
    lp[4, 2] = math.nan
    with pytest.raises(ValueError) as info:
        search(lp)
    message = str(info.value)
    assert message.startswith("log_probs has NaN or +inf at frame 4"), message
    assert "log_probs[0]" not in message


def test_batch_errors_name_the_utterance():
    lp = _log_probs(3, 5, 4)
    lp[2, 1, 0] = math.inf
    with pytest.raises(ValueError, match=r"log_probs\[2\] has NaN or \+inf at frame 1"):
        dec.ctc_greedy_search(lp)


def _public_callables():
    for name in OPS:
        obj = getattr(dec, name)
        if inspect.isfunction(obj) or (inspect.isclass(obj) and not issubclass(obj, tuple)):
            yield name, obj


@pytest.mark.parametrize("name", [name for name, _ in _public_callables()])
def test_every_public_op_has_a_numpy_docstring(name):
    """help(oasr_decoder.<op>) shows its parameters, its result, and an example."""
    obj = getattr(dec, name)
    doc = inspect.getdoc(obj) or ""
    assert len(doc.splitlines()) >= 8, f"{name}: a short docstring"
    needed = ["Parameters\n----------", "Examples\n--------"]
    if inspect.isfunction(obj):
        needed.append("Returns\n-------")
    for section in needed:
        assert section in doc, f"{name}'s docstring has no {section.splitlines()[0]!r} section"
