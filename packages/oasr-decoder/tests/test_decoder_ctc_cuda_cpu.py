"""What CI can prove about the GPU decoders without a GPU: argument checks that run before any
launch, the module list, and a real nvcc compile of the CUDA modules for sm_90a."""

from __future__ import annotations

import os
import shutil

import pytest
import torch

import oasr_decoder as dec
from oasr_decoder import ctc, ctc_cuda
from oasr_jit import is_complete_shared_object, parse_arch


def _log_probs(*shape):
    return torch.log_softmax(torch.randn(*shape), -1)


def test_the_call_follows_the_device():
    """One name per algorithm: a CPU tensor takes the host path (lists of Hypothesis); the GPU
    implementations refuse it with the fix; the device-specific spellings are gone."""
    lp = _log_probs(2, 4, 5)
    assert isinstance(dec.ctc_greedy_search(lp)[0], dec.Hypothesis)
    assert isinstance(dec.ctc_prefix_beam_search(lp)[0][0], dec.Hypothesis)
    for call in (ctc_cuda.prefix_beam_search, ctc_cuda.greedy_search):
        with pytest.raises(ValueError, match=r"CUDA tensor.*CPU decoders"):
            call(lp)
    with pytest.raises(TypeError, match=r"torch\.Tensor"):
        dec.ctc_prefix_beam_search([[0.0]])
    for gone in ("ctc_greedy_decode", "ctc_beam_search_decode", "GpuStreamingDecoder"):
        assert not hasattr(dec, gone), gone
    assert isinstance(dec.CtcStreamingDecoder(), ctc.CpuStreamingDecoder)
    assert isinstance(dec.CtcStreamingDecoder(), dec.CtcStreamingDecoder)
    with pytest.raises(ValueError, match="one stream"):
        dec.CtcStreamingDecoder(num_streams=2)
    with pytest.raises(ValueError, match="CPU or CUDA"):
        dec.CtcStreamingDecoder(device="meta")


def test_stream_settings_are_checked_before_any_allocation():
    with pytest.raises(ValueError, match="num_streams"):
        dec.CtcStreamingDecoder(num_streams=0, device="cuda")
    with pytest.raises(ValueError, match=r"beam_size must be in \[1, 32\]"):
        dec.CtcStreamingDecoder(num_streams=2, device="cuda", beam_size=40)
    with pytest.raises(ValueError, match="nbest"):
        dec.CtcStreamingDecoder(num_streams=2, device="cuda", beam_size=2, nbest=3)
    with pytest.raises(TypeError, match="blank_skip_threshold"):
        dec.CtcStreamingDecoder(num_streams=2, device="cuda", blank_skip_threshold="0.9")
    with pytest.raises(ValueError, match="max_frames"):
        dec.CtcStreamingDecoder(num_streams=2, device="cuda", max_frames=0)
    with pytest.raises(ValueError, match="CUDA device"):
        ctc_cuda.CudaStreamingDecoder(num_streams=2, device="cpu")


def test_the_family_lists_its_cuda_modules():
    from oasr_decoder._jit import production_specs

    assert [s.name for s in production_specs()] == [
        "oasr_decoder_ctc_cpu",
        "oasr_decoder_topk",
        "oasr_decoder_ctc_cuda",
    ]


@pytest.mark.skipif(
    shutil.which("nvcc") is None and not os.environ.get("CUDA_HOME"), reason="needs nvcc"
)
def test_ctc_cuda_module_compiles_for_sm90a(monkeypatch):
    from oasr_jit import arch

    arch._reset_for_tests()
    monkeypatch.setenv("OASR_CUDA_ARCH_LIST", "9.0a")
    try:
        from oasr_decoder._jit import gen_ctc_cuda_module

        spec = gen_ctc_cuda_module()
        assert spec.is_cuda
        assert parse_arch("9.0a") is not None
        assert "-gencode=arch=compute_90a,code=sm_90a" in spec.plan().manifest["ninja"]
        assert is_complete_shared_object(spec.build())
    finally:
        arch._reset_for_tests()
