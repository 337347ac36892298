"""Bad input raises a clear ValueError / TypeError before C++ is called, and C++ checks again
(direct module calls with the same mistakes raise too, never crash)."""

from __future__ import annotations

import math

import pytest
import torch

import oasr_decoder
from oasr_decoder import ContextGraph, CtcGreedySearch, CtcPrefixBeamSearch, CtcStreamingDecoder
from oasr_decoder._jit import module
from oasr_jit.testing import skip_unless_gpu

LP = torch.zeros(2, 5, 4).log_softmax(-1)


def _with_nan(b: int, t: int) -> torch.Tensor:
    lp = LP.clone()
    lp[b, t, 1] = math.nan
    return lp


@pytest.mark.parametrize("decode", ["greedy", "beam"])
@pytest.mark.parametrize(
    "log_probs, kwargs, error, match",
    [
        (LP[0], {}, ValueError, r"log_probs must be \[B, T, V\], got shape \(5, 4\)"),
        (LP[None], {}, ValueError, r"must be \[B, T, V\]"),
        (LP.numpy(), {}, TypeError, "must be a torch.Tensor"),
        (LP.double(), {}, TypeError, r"supported: float32; call \.float\(\)"),
        (LP.half(), {}, TypeError, r"call \.float\(\)"),
        (LP.to("meta"), {}, ValueError, r"must be a cpu tensor, got device meta; move it with"),
        (LP.transpose(1, 2).contiguous().transpose(1, 2), {}, ValueError, "unit stride over V"),
        (LP[:, :, :0], {}, ValueError, "empty vocabulary"),
        (LP, {"lengths": [5, 6]}, ValueError, r"lengths must be <= T = 5, got 6 at index 1"),
        (LP, {"lengths": [-1, 2]}, ValueError, r"lengths must be >= 0, got -1 at index 0"),
        (LP, {"lengths": [5]}, ValueError, r"lengths must be \[B\] with B = 2"),
        (LP, {"lengths": torch.tensor([1.0, 2.0])}, TypeError, "lengths must hold integers"),
        (LP, {"lengths": [1.5, 2]}, TypeError, r"lengths\[i\] must be an int"),
        (
            LP,
            {"blank": 4},
            ValueError,
            r"blank = 4 is outside the vocabulary of log_probs \(V = 4\)",
        ),
        (LP, {"blank": -1}, ValueError, "blank must be a token id >= 0"),
        (LP, {"blank": True}, TypeError, "blank must be an int, got bool"),
        (_with_nan(1, 3), {}, ValueError, r"log_probs\[1\] has NaN or \+inf at frame 3, token"),
        (LP.clone().fill_(math.inf), {}, ValueError, r"NaN or \+inf"),
        (LP, {"num_threads": 0}, ValueError, "num_threads must be at least 1"),
    ],
)
def test_python_checks(decode, log_probs, kwargs, error, match):
    fn = (
        oasr_decoder.ctc_greedy_search
        if decode == "greedy"
        else oasr_decoder.ctc_prefix_beam_search
    )
    with pytest.raises(error, match=match):
        fn(log_probs, **kwargs)


def test_nan_in_padding_is_fine():
    assert oasr_decoder.ctc_prefix_beam_search(_with_nan(1, 3), [5, 3])


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"beam_size": 0}, ValueError, "beam_size must be at least 1, got 0"),
        ({"beam_size": 2.0}, TypeError, "beam_size must be an int"),
        ({"beam_size": 3, "nbest": 4}, ValueError, r"nbest must be in \[1, beam_size = 3\]"),
        ({"nbest": 0}, ValueError, "nbest must be in"),
        ({"blank_skip_threshold": 0.0}, ValueError, r"probability in \(0, 1\]"),
        ({"blank_skip_threshold": 1.5}, ValueError, r"probability in \(0, 1\]"),
        ({"blank_skip_threshold": math.nan}, ValueError, r"probability in \(0, 1\]"),
        ({"blank_skip_threshold": "0.9"}, TypeError, "float or None"),
        ({"context_graph": [[1, 2]]}, TypeError, "must be a ContextGraph or None"),
    ],
)
def test_search_settings(kwargs, error, match):
    with pytest.raises(error, match=match):
        CtcPrefixBeamSearch(**kwargs)
    with pytest.raises(error, match=match):
        CtcStreamingDecoder(**kwargs)
    with pytest.raises(error, match=match):
        oasr_decoder.ctc_prefix_beam_search(LP, **kwargs)


def test_single_utterance_shapes():
    with pytest.raises(ValueError, match=r"log_probs must be \[T, V\], got shape \(2, 5, 4\)"):
        CtcPrefixBeamSearch()(LP)
    with pytest.raises(ValueError, match=r"\[T, V\]"):
        CtcGreedySearch()(LP)
    with pytest.raises(ValueError, match=r"lengths must be <= T = 5"):
        CtcGreedySearch()(LP[0], length=9)
    stream = CtcStreamingDecoder()
    with pytest.raises(ValueError, match=r"\[T, V\]"):
        stream.accept(LP)
    with pytest.raises(ValueError, match=r"log_probs has NaN or \+inf at frame 2, token"):
        stream.accept(_with_nan(0, 2)[0])
    assert stream.num_frames == 0  # a refused chunk changes nothing
    with pytest.raises(ValueError, match="blank = 7 is outside"):
        CtcStreamingDecoder(blank=7).accept(LP[0])


# ---------------------------------------------------------------------------------------------
# the launchers check again: the module called directly with the same mistakes


def _beam_outputs(batch=2, nbest=1, capacity=5):
    return (
        torch.empty(batch, nbest, capacity, dtype=torch.int32),
        torch.empty(batch, nbest, capacity, dtype=torch.int32),
        torch.empty(batch, nbest, dtype=torch.int32),
        torch.empty(batch, nbest, dtype=torch.float64),
        torch.empty(batch, dtype=torch.int32),
    )


LENGTHS = torch.tensor([5, 5])


@pytest.mark.parametrize(
    "change, error, match",
    [
        ({"log_probs": LP.double()}, TypeError, r"float32: call \.float\(\)"),
        ({"log_probs": LP[0]}, ValueError, "log_probs must be 3-D"),
        ({"log_probs": LP.transpose(1, 2).contiguous().transpose(1, 2)}, ValueError, "unit stride"),
        ({"log_probs": _with_nan(1, 2)}, ValueError, r"log_probs\[1\] has NaN or \+inf at frame 2"),
        (
            {"lengths": torch.tensor([5, 6])},
            ValueError,
            r"lengths\[1\] = 6 is outside \[0, T = 5\]",
        ),
        ({"lengths": torch.tensor([-1, 5])}, ValueError, r"lengths\[0\] = -1"),
        (
            {"lengths": torch.tensor([5, 5], dtype=torch.int32)},
            TypeError,
            "lengths has dtype int32",
        ),
        ({"lengths": torch.tensor([5])}, ValueError, r"lengths.shape\[0\] must be 2"),
        ({"beam_size": 0}, ValueError, "beam_size must be at least 1"),
        ({"blank": 4}, ValueError, r"blank must be a token id in \[0, 4\), got 4"),
        ({"threshold": 2.0}, ValueError, r"blank_skip_threshold must be a probability"),
        ({"graph": "not a graph"}, TypeError, "made by context_graph_create, got ffi.String"),
        ({"graph": LP}, TypeError, "context_graph must be a context graph made by"),
        (
            {"outputs": _beam_outputs(capacity=4)},
            ValueError,
            r"allocate \[B, nbest, max\(lengths\)\]",
        ),
        ({"outputs": _beam_outputs(nbest=2), "beam_size": 1}, ValueError, "nbest"),
        (
            {"outputs": (*_beam_outputs()[:4], torch.empty(2))},
            TypeError,
            "num_hyps_out has dtype float32",
        ),
    ],
)
def test_launcher_checks(change, error, match):
    args = dict(
        outputs=_beam_outputs(),
        log_probs=LP,
        lengths=LENGTHS,
        beam_size=2,
        blank=0,
        threshold=None,
        graph=None,
    )
    args.update(change)
    fn = module().ctc_prefix_beam_search
    with pytest.raises(error, match=match):
        fn(
            *args["outputs"],
            args["log_probs"],
            args["lengths"],
            args["beam_size"],
            args["blank"],
            args["threshold"],
            args["graph"],
            0,
        )


def test_launcher_checks_greedy_graph_and_stream():
    mod = module()
    out = (
        torch.empty(2, 5, dtype=torch.int32),
        torch.empty(2, 5, dtype=torch.int32),
        torch.empty(2, dtype=torch.int32),
        torch.empty(2, dtype=torch.float64),
    )
    with pytest.raises(ValueError, match="blank must be a token id"):
        mod.ctc_greedy_search(*out, LP, LENGTHS, 9, 0)
    with pytest.raises(ValueError, match=r"allocate \[B, max\(lengths\)\]"):
        mod.ctc_greedy_search(
            out[0][:, :3].contiguous(),
            out[1][:, :3].contiguous(),
            out[2],
            out[3],
            LP,
            LENGTHS,
            0,
            0,
        )
    # a graph with a token outside the vocabulary, or with the blank, is refused by C++ too
    graph = ContextGraph([[1, 7]])
    with pytest.raises(ValueError, match="context_graph has token 7"):
        mod.ctc_prefix_beam_search(*_beam_outputs(), LP, LENGTHS, 2, 0, None, graph._handle, 0)
    with pytest.raises(ValueError, match="with the blank token 1"):
        mod.ctc_prefix_beam_search(
            *_beam_outputs(), LP, LENGTHS, 2, 1, None, ContextGraph([[1, 2]])._handle, 0
        )
    # handles are type-checked
    stream = mod.ctc_stream_create(2, 0, None, None)
    with pytest.raises(TypeError, match="must be a context graph"):
        mod.context_graph_score(stream, torch.zeros(1, dtype=torch.int32), False)
    with pytest.raises(TypeError, match="must be a stream"):
        mod.ctc_stream_accept(graph._handle, LP[0])
    with pytest.raises(ValueError, match="phrase 0 is empty"):
        mod.context_graph_create(
            torch.zeros(0, dtype=torch.int32),
            torch.tensor([0, 0]),
            torch.tensor([1.0], dtype=torch.float64),
        )
    # stream: the vocabulary of its first chunk, the capacity of the result buffers
    mod.ctc_stream_accept(stream, LP[0])
    with pytest.raises(ValueError, match="V = 3 but the stream's earlier chunks had V = 4"):
        mod.ctc_stream_accept(stream, torch.zeros(2, 3))
    with pytest.raises(ValueError, match="decoded 5 frames"):
        mod.ctc_stream_result(
            stream,
            torch.empty(1, 4, dtype=torch.int32),
            torch.empty(1, 4, dtype=torch.int32),
            torch.empty(1, dtype=torch.int32),
            torch.empty(1, dtype=torch.float64),
            True,
        )


@skip_unless_gpu()
def test_cuda_tensors_are_refused_with_the_fix():
    """The CPU decoders read host memory: a CUDA tensor is refused by Python and by C++ (which
    reads only its metadata), never dereferenced."""
    lp = LP.cuda()
    with pytest.raises(ValueError, match=r"must be a cpu tensor, got device cuda:0"):
        oasr_decoder.CtcStreamingDecoder().accept(lp[0])
    with pytest.raises(ValueError, match=r"log_probs must be a CPU tensor.*call \.cpu\(\)"):
        module().ctc_prefix_beam_search(*_beam_outputs(), lp, LENGTHS, 2, 0, None, None, 0)
    with pytest.raises(ValueError, match=r"tokens_out must be a CPU tensor"):
        module().ctc_prefix_beam_search(
            *(t.cuda() for t in _beam_outputs()), LP, LENGTHS, 2, 0, None, None, 0
        )
