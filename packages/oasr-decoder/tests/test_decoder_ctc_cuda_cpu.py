"""What CI can prove about the GPU decoders without a GPU: argument checks that run before any
launch, the module list, and a real nvcc compile of the CUDA modules for sm_90a."""

from __future__ import annotations

import os
import shutil

import pytest
import torch

import oasr_decoder as dec
from oasr_jit import is_complete_shared_object, parse_arch


def _log_probs(*shape):
    return torch.log_softmax(torch.randn(*shape), -1)


def test_cpu_tensors_are_refused_with_the_fix():
    for call in (dec.ctc_beam_search_decode, dec.ctc_greedy_decode):
        with pytest.raises(ValueError, match=r"call \.cuda\(\), or use the CPU decoders"):
            call(_log_probs(1, 4, 5))
    with pytest.raises(TypeError, match=r"torch\.Tensor"):
        dec.ctc_beam_search_decode([[0.0]])


def test_stream_settings_are_checked_before_any_allocation():
    with pytest.raises(ValueError, match="num_streams"):
        dec.GpuStreamingDecoder(0)
    with pytest.raises(ValueError, match=r"beam_size must be in \[1, 32\]"):
        dec.GpuStreamingDecoder(2, beam_size=40)
    with pytest.raises(ValueError, match="nbest"):
        dec.GpuStreamingDecoder(2, beam_size=2, nbest=3)
    with pytest.raises(TypeError, match="blank_skip_threshold"):
        dec.GpuStreamingDecoder(2, blank_skip_threshold="0.9")
    with pytest.raises(ValueError, match="max_frames"):
        dec.GpuStreamingDecoder(2, max_frames=0)
    with pytest.raises(ValueError, match="CUDA device"):
        dec.GpuStreamingDecoder(2, device="cpu")


def test_the_family_lists_its_cuda_modules():
    from oasr_decoder._jit import production_specs

    assert [s.name for s in production_specs()] == ["oasr_decoder_ctc_cpu", "oasr_decoder_topk", "oasr_decoder_ctc_cuda"]


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
