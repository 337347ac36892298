"""A streaming chunk (64 streams x 16 frames, V 5000, beam 10): host clock to completion back to
back, after 10 ms asleep and after 10 ms of other host work (the bench runs the CPU peer between
chunks); the host time of ``accept``; its GPU time; and the same chunk as a CUDA graph replay."""

import json
import os
import statistics
import time

import torch

import oasr_decoder
from oasr_decoder.bench import ctc_log_probs

STREAMS, CHUNK, VOCAB, CHUNKS = 64, 16, 5000, 47
log_probs = ctc_log_probs(STREAMS, CHUNKS * CHUNK, VOCAB).cuda()
chunks = [c.contiguous() for c in log_probs.split(CHUNK, dim=1)]
clock = time.perf_counter_ns
junk = [bytearray(1 << 20) for _ in range(32)]  # 32 MB of host memory to walk between chunks


def gap(kind: str) -> None:
    if kind == "sleep":
        time.sleep(0.01)
    elif kind == "busy":
        start = clock()
        while clock() - start < 10_000_000:
            for block in junk:
                block[::4096] = b"\x01" * len(block[::4096])


def median_us(samples) -> float:
    return round(statistics.median(samples) / 1e3, 1)


def timed_chunks(feed, reset, kind: str) -> float:
    """Median host clock of a chunk, the first 24 chunks of two utterances per stream."""
    samples = []
    for _ in range(2):
        reset()
        torch.cuda.synchronize()
        for chunk in chunks[:24]:
            gap(kind)
            start = clock()
            feed(chunk)
            torch.cuda.synchronize()
            samples.append(clock() - start)
    return median_us(samples)


results = {}
decoder = oasr_decoder.GpuStreamingDecoder(
    STREAMS, beam_size=10, blank=0, max_frames=CHUNKS * CHUNK + CHUNK
)
decoder.accept(chunks[0])  # build and load
for kind in ("none", "sleep", "busy"):
    results[f"eager_{kind}"] = timed_chunks(decoder.accept, decoder.reset, kind)


def host_only(chunk) -> int:
    start = clock()
    decoder.accept(chunk)
    elapsed = clock() - start
    torch.cuda.synchronize()
    return elapsed


def gpu_time(chunk) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda._sleep(200_000)  # the launches queue behind it: GPU time only
    start.record()
    decoder.accept(chunk)
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) * 1e6


decoder.reset()
results["eager_host_only"] = median_us([host_only(chunk) for chunk in chunks])
decoder.reset()
results["gpu_chunk"] = median_us([gpu_time(chunk) for chunk in chunks])
decoder.reset()
for chunk in chunks:
    decoder.accept(chunk)
want = decoder.result().to_hypotheses()

graphed = oasr_decoder.GpuStreamingDecoder(
    STREAMS, beam_size=10, blank=0, max_frames=CHUNKS * CHUNK + CHUNK
)
static = chunks[0].clone()
side = torch.cuda.Stream()
side.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(side):
    graphed.accept(static)
torch.cuda.current_stream().wait_stream(side)
torch.cuda.synchronize()
graph = torch.cuda.CUDAGraph()
with torch.cuda.graph(graph, stream=side):
    graphed.accept(static)
for kind in ("none", "sleep", "busy"):
    samples = []
    for _ in range(2):
        graphed.reset()
        torch.cuda.synchronize()
        for chunk in chunks[:24]:
            static.copy_(chunk)  # the encoder's output would land there
            torch.cuda.synchronize()
            gap(kind)
            start = clock()
            graph.replay()
            torch.cuda.synchronize()
            samples.append(clock() - start)
    results[f"graph_{kind}"] = median_us(samples)
graphed.reset()
for chunk in chunks:
    static.copy_(chunk)
    graph.replay()
torch.cuda.synchronize()
results["graph_result_equals_eager"] = graphed.result().to_hypotheses() == want
print(json.dumps(results, indent=1))
with open(os.path.join(os.environ.get("OUT", "."), "streaming_latency.json"), "w") as f:
    json.dump(results, f, indent=1)
