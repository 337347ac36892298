"""The PyTorch twins (oasr_decoder.twins) on the CPU: topk's defined order of ties, NaN and
signed zeros, and the greedy twin against the host decoder on random posteriors."""

from __future__ import annotations

import math
import random

import pytest
import torch
from decoder_reference import random_log_probs

import oasr_decoder as dec
from oasr_decoder import twins


def test_topk_twin_orders_ties_by_index_nan_first_and_zeros_equal():
    x = torch.tensor([[1.0, 3.0, 3.0, -0.0, math.nan, math.inf, 0.0, 3.0]])
    values, indices = twins.topk(x, 8)
    assert indices.tolist() == [[4, 5, 1, 2, 7, 0, 3, 6]]
    assert torch.equal(values.isnan(), torch.tensor([[True] + [False] * 7]))
    assert values[0, 1:6].tolist() == [math.inf, 3.0, 3.0, 3.0, 1.0]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_topk_twin_agrees_with_torch_topk_values(dtype):
    x = torch.randn(64, 500, generator=torch.Generator().manual_seed(2)).to(dtype)
    x[3, :40] = 1.0  # ties
    values, indices = twins.topk(x, 16)
    assert torch.equal(values, torch.topk(x, 16, dim=-1).values)
    assert torch.equal(x.gather(-1, indices), values)
    out = (torch.empty(64, 16, dtype=dtype), torch.empty(64, 16, dtype=torch.int64))
    got = twins.topk(x, 16, out=out)
    assert got.values is out[0] and torch.equal(got.indices, indices)


def test_topk_twin_refuses_bad_k():
    with pytest.raises(ValueError, match="k must be in"):
        twins.topk(torch.zeros(2, 5), 6)


@pytest.mark.parametrize("seed", range(4))
def test_greedy_twin_equals_the_host_decoder(seed):
    rng = random.Random(seed)
    batch = torch.stack([random_log_probs(rng, 30, 11, "smooth") for _ in range(3)])
    lengths = [30, 17, 0]
    got = dec.ctc_greedy_search(batch, lengths, blank=2)
    want = twins.ctc_greedy_search(batch, lengths, blank=2)
    assert got == want


def test_greedy_twin_refuses_a_dead_frame_as_the_decoder_does():
    lp = torch.zeros(1, 4, 3).log_softmax(-1)
    lp[0, 2] = -math.inf
    for search in (dec.ctc_greedy_search, twins.ctc_greedy_search):
        with pytest.raises(ValueError, match="-inf for every token at frame 2"):
            search(lp)
