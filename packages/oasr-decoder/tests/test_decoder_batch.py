"""The batch API: equal to decoding each utterance alone (lengths, strided inputs, padding with
garbage, any number of threads), and the GIL: TVM-FFI releases it for the whole C++ call, so
other Python threads run during a decode and shards of a batch decode in parallel."""

from __future__ import annotations

import itertools
import math
import os
import random
import subprocess
import sys
import threading
import time

import pytest
import torch
from decoder_reference import random_log_probs, random_phrases

import oasr_decoder
from oasr_decoder import ContextGraph, CtcGreedySearch, CtcPrefixBeamSearch
from oasr_decoder._jit import module


def _batch(rng, batch, num_frames, vocab, kind="smooth"):
    lp = torch.stack([random_log_probs(rng, num_frames, vocab, kind) for _ in range(batch)])
    lengths = [rng.randint(0, num_frames) for _ in range(batch)]
    lengths[rng.randrange(batch)] = num_frames
    return lp, lengths


@pytest.mark.parametrize("num_threads", [1, 2, 3, None])
def test_batch_equals_one_by_one(num_threads):
    rng = random.Random(41)
    lp, lengths = _batch(rng, 7, 60, 37, "peaky")
    graph = ContextGraph(*random_phrases(rng, 37, 0, 5))
    for kwargs in (
        dict(beam_size=5, nbest=3),
        dict(beam_size=3, blank_skip_threshold=0.9),
        dict(beam_size=4, nbest=2, context_graph=graph),
    ):
        batch = oasr_decoder.ctc_prefix_beam_search(lp, lengths, num_threads=num_threads, **kwargs)
        search = CtcPrefixBeamSearch(**kwargs)
        assert batch == [search(lp[b], length=n) for b, n in enumerate(lengths)]
        assert search.decode_batch(lp, torch.tensor(lengths), num_threads=num_threads) == batch
    greedy = oasr_decoder.ctc_greedy_search(lp, lengths, num_threads=num_threads)
    assert greedy == [CtcGreedySearch()(lp[b], length=n) for b, n in enumerate(lengths)]


def test_strided_inputs_and_garbage_padding():
    rng = random.Random(42)
    base, lengths = _batch(rng, 5, 40, 21)
    padded = torch.full((5, 50, 30), math.nan)  # NaN past each length and past V: never read
    padded[:, :40, :21] = base
    for b, n in enumerate(lengths):
        padded[b, n:] = math.nan
    view = padded[:, :40, :21]  # strides (1500, 30, 1)
    assert not view.is_contiguous()
    got = oasr_decoder.ctc_prefix_beam_search(view, lengths, beam_size=4, nbest=2)
    assert got == oasr_decoder.ctc_prefix_beam_search(base, lengths, beam_size=4, nbest=2)
    # a transposed [T, B, V] tensor read as [B, T, V]
    tbv = base.transpose(0, 1).contiguous().transpose(0, 1)
    assert oasr_decoder.ctc_greedy_search(tbv, lengths) == oasr_decoder.ctc_greedy_search(
        base, lengths
    )


def test_empty_batch_and_lengths_forms():
    assert oasr_decoder.ctc_prefix_beam_search(torch.zeros(0, 5, 4)) == []
    lp = torch.zeros(2, 3, 4).log_softmax(-1)
    a = oasr_decoder.ctc_prefix_beam_search(lp, [3, 1], beam_size=2)
    b = oasr_decoder.ctc_prefix_beam_search(
        lp, torch.tensor([3, 1], dtype=torch.int32), beam_size=2
    )
    assert a == b
    assert oasr_decoder.ctc_prefix_beam_search(lp) == oasr_decoder.ctc_prefix_beam_search(
        lp, [3, 3]
    )


# ---------------------------------------------------------------------------------------------
# the GIL


def _long_decode_inputs():
    """A batch whose beam search takes a few hundred ms on one core."""
    rng = random.Random(43)
    lp = torch.stack([random_log_probs(rng, 600, 1000, "smooth") for _ in range(8)])
    return dict(log_probs=lp, beam_size=32, num_threads=1)


def _one_module_call(inputs):
    """The module's batch function called once, outputs allocated beforehand: the whole call is
    one C++ call (no torch op in between, which would drop and retake the GIL)."""
    lp = inputs["log_probs"]
    batch, num_frames, _ = lp.shape
    nbest = 1
    outputs = (
        torch.empty(batch, nbest, num_frames, dtype=torch.int32),
        torch.empty(batch, nbest, num_frames, dtype=torch.int32),
        torch.empty(batch, nbest, dtype=torch.int32),
        torch.empty(batch, nbest, dtype=torch.float64),
        torch.empty(batch, dtype=torch.int32),
    )
    lengths = torch.full((batch,), num_frames, dtype=torch.int64)
    fn = module().ctc_prefix_beam_search
    return lambda: fn(*outputs, lp, lengths, inputs["beam_size"], 0, None, None, 0)


def _largest_tick_gap(fn) -> tuple[float, float]:
    """Run fn() in a thread while this one ticks as fast as it can; return (duration of fn,
    the largest gap between two ticks during it)."""
    ticks: list[float] = []
    span: dict[str, float] = {}
    done = threading.Event()

    def work():
        span["start"] = time.perf_counter()
        fn()
        span["end"] = time.perf_counter()
        done.set()

    worker = threading.Thread(target=work)
    worker.start()
    while not done.is_set():
        ticks.append(time.perf_counter())
    worker.join()
    inside = [span["start"]] + [t for t in ticks if span["start"] < t < span["end"]] + [span["end"]]
    return span["end"] - span["start"], max(b - a for a, b in itertools.pairwise(inside))


def test_decoding_releases_the_gil():
    """TVM-FFI's Function.__call__ wraps the C call in Py_BEGIN/END_ALLOW_THREADS when its
    release_gil is set (the default, TVM_FFI_RELEASE_GIL_BY_DEFAULT=1; the module loader sets it
    explicitly). So this thread keeps ticking while another decodes; with release_gil off, it
    stalls for the whole C++ call."""
    fn = module().ctc_prefix_beam_search
    assert fn.release_gil
    decode = _one_module_call(_long_decode_inputs())
    duration, gap = _largest_tick_gap(decode)
    assert duration > 0.1, "the workload is too small to tell"
    assert gap < 0.5 * duration, (duration, gap)

    fn.release_gil = False  # the control: the same call holding the GIL
    try:
        held_duration, held_gap = _largest_tick_gap(decode)
    finally:
        fn.release_gil = True
    assert held_gap > 0.5 * held_duration, (held_duration, held_gap)


def test_release_gil_does_not_depend_on_the_environment():
    """TVM_FFI_RELEASE_GIL_BY_DEFAULT=0 turns the default off for new function objects; the
    decoder module sets it on its own functions regardless."""
    code = (
        "import tvm_ffi\n"
        "from oasr_decoder._jit import FUNCTIONS, module\n"
        "assert not tvm_ffi.get_global_func('ffi.ModuleGetFunction').release_gil\n"
        "mod = module()\n"
        "assert all(getattr(mod, name).release_gil for name in FUNCTIONS)\n"
        "print('ok')\n"
    )
    env = {**os.environ, "TVM_FFI_RELEASE_GIL_BY_DEFAULT": "0"}
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert proc.returncode == 0 and "ok" in proc.stdout, proc.stderr
