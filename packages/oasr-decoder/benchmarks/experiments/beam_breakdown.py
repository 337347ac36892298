"""Where B 16 x T 250 x V 5000 beam-10 GPU decode time goes: kernels (torch.profiler) vs host."""

import time

import torch
from torch.profiler import ProfilerActivity, profile

import oasr_decoder
from oasr_decoder.bench import ctc_log_probs

for b, t in ((1, 250), (16, 250), (16, 750)):
    x = ctc_log_probs(b, t, 5000).cuda()
    for _ in range(3):
        oasr_decoder.ctc_beam_search_decode(x, beam_size=10, blank=0)
    torch.cuda.synchronize()
    samples = []
    for _ in range(7):
        t0 = time.perf_counter()
        oasr_decoder.ctc_beam_search_decode(x, beam_size=10, blank=0)
        torch.cuda.synchronize()
        samples.append((time.perf_counter() - t0) * 1e6)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        oasr_decoder.ctc_beam_search_decode(x, beam_size=10, blank=0)
        torch.cuda.synchronize()
    print(f"B {b} T {t}: host clock median {sorted(samples)[3]:.0f} us")
    for e in prof.key_averages():
        if e.device_type.name == "CUDA" or "cuda" in e.key.lower() or e.self_device_time_total > 0:
            times = f"device {e.device_time_total:9.1f} us  cpu {e.cpu_time_total:8.1f} us"
            print(f"   {e.key[:70]:70s} n={e.count:3d} {times}")
