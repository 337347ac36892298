"""One GPU beam search at B 16, T 250, V 5000, beam 10 (the bench's posteriors), for ncu."""

import torch

import oasr_decoder
from oasr_decoder.bench import ctc_log_probs

x = ctc_log_probs(16, 250, 5000).cuda()
for _ in range(3):
    oasr_decoder.ctc_beam_search_decode(x, beam_size=10, blank=0)
torch.cuda.synchronize()
torch.cuda.nvtx.range_push("profiled")
oasr_decoder.ctc_beam_search_decode(x, beam_size=10, blank=0)
torch.cuda.synchronize()
