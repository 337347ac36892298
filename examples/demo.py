"""OASR demo: the JIT core end to end.

1. a host-only C++ module: built, loaded and called on CPU tensors;
2. the core's CUDA self-test module compiled for sm_90a (no GPU needed to compile);
3. on a GPU: its kernels launched eagerly and inside a CUDA graph captured on a side stream,
   checked against PyTorch;
4. the norm family (when installed): a Conformer-style fused add + LayerNorm and a SwooshR,
   checked against PyTorch (on a machine without a GPU, their PyTorch twins);
5. the decoder family (when installed): a synthetic utterance decoded on the CPU (greedy, prefix
   beam search, phrase boosting), its words timed; on a GPU also decoded there (the same n-best);
6. the gemm family (when installed): a Conformer feed-forward up-projection with bias and Swish in
   the GEMM's epilogue, checked against PyTorch, and the kernel the selection picks for it (on a
   machine without a GPU, the PyTorch twin and the kernel an H200 would run); a CTC head's
   log-probabilities (`gemm_log_softmax`).

Run it with `python3 -m pip install nox && python3 -m nox -s demo`.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import oasr_jit

HERE = Path(__file__).resolve().parent


def host_module() -> None:
    import torch

    spec = oasr_jit.gen_jit_spec("oasr_demo_host_ops", [HERE / "host_ops.cc"])
    start = time.perf_counter()
    module = spec.build_and_load()
    x = torch.randn(1000)
    out = torch.full_like(x, float("nan"))
    module.cumsum(out, x)
    torch.testing.assert_close(out, x.double().cumsum(0).float(), rtol=1e-5, atol=1e-4)
    print(
        f"[demo] host module {spec.name} ({spec.key}): cumsum of 1000 floats ok "
        f"({time.perf_counter() - start:.2f} s incl. build)"
    )


def cuda_module():
    from oasr_jit.selftest import gen_selftest_module

    spec = gen_selftest_module()
    start = time.perf_counter()
    spec.build()
    print(
        f"[demo] CUDA module {spec.name} compiled for {oasr_jit.target_arch().sm} -> "
        f"{spec.lib_path} ({time.perf_counter() - start:.2f} s)"
    )
    return spec


def gpu_launches(spec) -> None:
    import torch

    module = spec.build_and_load()
    compiled = torch.zeros(1, dtype=torch.int32, device="cuda")
    module.compiled_sm(compiled)
    print(f"[demo] device code runs as sm_{compiled.item()} on {torch.cuda.get_device_name()}")

    x = torch.randn(64, 1280, device="cuda", dtype=torch.float16)
    want = x.double().sum(1).float()
    out = torch.full((64,), float("nan"), device="cuda")
    module.row_sum(out, x)
    torch.testing.assert_close(out, want, rtol=1e-3, atol=1e-2)
    print("[demo] eager row_sum ok")

    # Capture on a side stream: the launcher must use the caller's (capturing) stream.
    out.fill_(float("nan"))
    graph = torch.cuda.CUDAGraph()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side), torch.cuda.graph(graph, stream=side):
        module.row_sum(out, x)
    torch.cuda.current_stream().wait_stream(side)
    for _ in range(3):
        x.normal_()
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        torch.testing.assert_close(out, x.double().sum(1).float(), rtol=1e-3, atol=1e-2)
    print("[demo] row_sum captured in a CUDA graph on a side stream, replayed 3x: ok")


def norm_family(has_gpu: bool) -> None:
    try:
        import oasr_norm
    except ImportError:
        print("[demo] oasr-norm not installed: norm example skipped")
        return
    import torch
    import torch.nn.functional as F

    device = "cuda" if has_gpu else "cpu"
    ops = oasr_norm if has_gpu else oasr_norm.twins
    x = torch.randn(8, 250, 512, device=device, dtype=torch.float16)
    residual = torch.randn_like(x)
    w, b = (
        torch.randn(512, device=device, dtype=x.dtype),
        torch.randn(512, device=device, dtype=x.dtype),
    )
    y, s = ops.add_layer_norm(x, residual, w, b, 1e-5)
    assert torch.equal(s, x + residual)
    ref = F.layer_norm((x + residual).float(), (512,), w.float(), b.float(), 1e-5).half()
    torch.testing.assert_close(y, ref, rtol=1e-3, atol=2e-3)
    z = ops.swoosh_r(y)
    swoosh = (
        torch.logaddexp(torch.zeros_like(y.float()), y.float() - 1) - 0.08 * y.float() - 0.313261687
    )
    torch.testing.assert_close(z, swoosh.half(), rtol=1e-3, atol=2e-3)
    where = "kernels on " + torch.cuda.get_device_name() if has_gpu else "PyTorch twins (no GPU)"
    print(f"[demo] norm: add_layer_norm + swoosh_r on [8, 250, 512] fp16 ok ({where})")


def decoder_family(has_gpu: bool) -> None:
    try:
        import oasr_decoder as dec
    except ImportError:
        print("[demo] oasr-decoder not installed: decoder example skipped")
        return
    import torch

    # "hello world oasr" as SentencePiece pieces; the posteriors are peaky CTC spikes on a blank
    # background, and at frame 29 the rare piece "asr" is a little less likely than "as".
    pieces = ["<blk>", "▁hel", "lo", "▁wor", "ld", "▁o", "asr", "as"]
    spikes = {3: {1: 11}, 6: {2: 11}, 14: {3: 11}, 17: {4: 11}, 26: {5: 11}, 29: {6: 8.3, 7: 8.6}}
    logits = 0.5 * torch.randn(36, len(pieces), generator=torch.Generator().manual_seed(0))
    logits[:, 0] += 5
    for t, row in spikes.items():
        for token, value in row.items():
            logits[t, token] = value
    log_probs = logits.log_softmax(-1)

    start = time.perf_counter()
    greedy = dec.CtcGreedySearch()(log_probs)
    beam = dec.CtcPrefixBeamSearch(beam_size=8, nbest=2)(log_probs)
    graph = dec.ContextGraph([[5, 6]], bonus=1.0)  # boost the phrase "▁o asr"
    boosted = dec.CtcPrefixBeamSearch(beam_size=8, context_graph=graph)(log_probs)[0]
    elapsed = time.perf_counter() - start

    def text(tokens):
        return "".join(pieces[t] for t in tokens).replace("▁", " ").strip()

    assert text(greedy.tokens) == text(beam[0].tokens) == "hello world oas"
    assert text(beam[1].tokens) == text(boosted.tokens) == "hello world oasr"
    spans = dec.hypothesis_spans(boosted.tokens, boosted.frames, log_probs.shape[0])
    words = dec.group_words(spans, pieces, frame_shift_s=0.04)
    timed = ", ".join(f"{w.word} {w.start_s:.2f}-{w.end_s:.2f}s" for w in words)
    print(
        f"[demo] decoder (CPU): greedy and beam search {text(beam[0].tokens)!r}, with "
        f"'oasr' boosted {text(boosted.tokens)!r}; words: {timed} ({elapsed:.2f} s incl. build)"
    )
    if not has_gpu:
        print("[demo] no GPU: GPU decoders skipped")
        return
    batch = log_probs[None].cuda()  # [B = 1, T, V]
    gpu_beam = dec.ctc_prefix_beam_search(batch, beam_size=8, nbest=2).to_hypotheses()[0]
    gpu_greedy = dec.ctc_greedy_search(batch).to_hypotheses()[0][0]
    assert [(h.tokens, h.frames) for h in gpu_beam] == [(h.tokens, h.frames) for h in beam]
    assert gpu_greedy == greedy
    print(f"[demo] decoder (GPU): the same n-best as the CPU: {[text(h.tokens) for h in gpu_beam]}")


def gemm_family(has_gpu: bool) -> None:
    try:
        import oasr_gemm
    except ImportError:
        print("[demo] oasr-gemm not installed: gemm example skipped")
        return
    import torch
    import torch.nn.functional as F

    device = "cuda" if has_gpu else "cpu"
    gen = torch.Generator(device=device).manual_seed(0)
    x = torch.randn(64, 250, 512, device=device, generator=gen).half()  # 64 utterances x 250 frames
    w = (torch.randn(2048, 512, device=device, generator=gen) / 512**0.5).half()  # nn.Linear weight
    b = torch.randn(2048, device=device, generator=gen).half()
    backend = "auto" if has_gpu else "torch"
    start = time.perf_counter()
    y = oasr_gemm.gemm_activation(x, w, b, activation="swish", backend=backend)
    if has_gpu:
        torch.cuda.synchronize()
    elapsed = time.perf_counter() - start
    ref = F.silu(F.linear(x.float(), w.float(), b.float()))
    torch.testing.assert_close(y.float(), ref, rtol=1e-2, atol=1e-2)
    chosen = oasr_gemm.select_default_config("gemm_activation", 16000, 2048, 512, x.dtype)
    kernel = chosen.config.id if chosen.config else "cuBLAS"
    where = f"on {torch.cuda.get_device_name()}" if has_gpu else "PyTorch twin (no GPU)"
    print(
        f"[demo] gemm: swish(x @ W.T + b), [64, 250, 512] x [2048, 512] fp16 ok, {where}; "
        f"the selection's kernel: {kernel} ({chosen.tier} tier; {elapsed:.2f} s"
        f"{' incl. build' if has_gpu else ''})"
    )
    # the CTC head: log-probabilities over a 5000-piece vocabulary for 4 utterances
    head = (torch.randn(5000, 512, device=device, generator=gen) / 512**0.5).half()
    log_probs = oasr_gemm.gemm_log_softmax(x[:4], head, backend=backend)
    ref = F.log_softmax(F.linear(x[:4].float(), head.float()), dim=-1)
    torch.testing.assert_close(log_probs.float(), ref, rtol=1e-2, atol=2e-2)
    print(f"[demo] gemm: log_softmax(x @ W_ctc.T), [4, 250, 512] x [5000, 512] fp16 ok, {where}")


def main() -> None:
    host_module()
    import torch

    has_gpu = torch.cuda.is_available()
    if not has_gpu and not os.environ.get("OASR_CUDA_ARCH_LIST"):
        os.environ["OASR_CUDA_ARCH_LIST"] = "9.0a"  # compile for Hopper without one
    spec = cuda_module()
    if has_gpu:
        gpu_launches(spec)
    else:
        print("[demo] no GPU: kernel launches skipped (compiled only)")
    norm_family(has_gpu)
    decoder_family(has_gpu)
    gemm_family(has_gpu)


if __name__ == "__main__":
    main()
