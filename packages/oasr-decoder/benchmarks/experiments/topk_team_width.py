"""Top-k time by team width (warps per row: 0 = the launcher's choice, 1, 2, 4, 8) against the
number of rows, V 500 / 5000, k 21 (beam 10's 2 * beam + 1), float32 / float16; inputs rotated
past L2, the calls queued behind a sleep kernel and timed with CUDA events."""

import json
import os

import torch

from oasr_decoder import _jit

mod = _jit.topk_module()
results = []
for dtype in (torch.float32, torch.float16):
    for vocab in (500, 5000):
        for rows in (64, 250, 1024, 4000, 16000):
            k, reps = 21, 60
            num_sets = max(2, (256 << 20) // (rows * vocab * 4))
            xs = [
                torch.randn(rows, vocab, device="cuda").mul(3).log_softmax(-1).to(dtype)
                for _ in range(num_sets)
            ]
            values = torch.empty(rows, k, dtype=dtype, device="cuda")
            indices = torch.empty(rows, k, dtype=torch.int32, device="cuda")
            row = {"dtype": str(dtype).removeprefix("torch."), "V": vocab, "rows": rows}
            first = None
            for width in (0, 1, 2, 4, 8):
                mod.topk(values, indices, xs[0], k, width)
                torch.cuda.synchronize()
                first = indices.clone() if first is None else first
                assert torch.equal(first, indices), (width, rows, vocab)
                start, end = (
                    torch.cuda.Event(enable_timing=True),
                    torch.cuda.Event(enable_timing=True),
                )
                torch.cuda._sleep(1_000_000)
                start.record()
                for r in range(reps):
                    mod.topk(values, indices, xs[r % num_sets], k, width)
                end.record()
                torch.cuda.synchronize()
                row[f"w{width}"] = round(start.elapsed_time(end) / reps * 1e3, 1)
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda._sleep(1_000_000)
            start.record()
            for r in range(reps):
                torch.topk(xs[r % num_sets], k, dim=-1)
            end.record()
            torch.cuda.synchronize()
            row["torch"] = round(start.elapsed_time(end) / reps * 1e3, 1)
            results.append(row)
            print(row, flush=True)
            del xs
json.dump(results, open(os.path.join(os.environ.get("OUT", "."), "topk_width.json"), "w"), indent=1)
