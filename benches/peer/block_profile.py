"""Where PyTorch eager spends the GPT-2 block's forward + backward (the block of `thunder
bench`'s `gpt2_block`, from torch_peer.py), by torch.profiler's self CPU time per op, to set
beside thunder's `THUNDER_CPU_SIMD_TRACE` summary of the same block.

    python benches/peer/block_profile.py [--threads 2] [--calls 50] [--rows 25]
"""

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_peer import gpt2_block_inputs, gpt2_block_loss  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--calls", type=int, default=50)
    p.add_argument("--rows", type=int, default=25)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    x, causal, params = gpt2_block_inputs()
    leaves = [x, *params]

    def step():
        for t in leaves:
            t.grad = None
        gpt2_block_loss(x, causal, *params).backward()

    for _ in range(10):
        step()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        for _ in range(args.calls):
            step()
    table = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=args.rows)
    print(f"torch {torch.__version__}, {args.threads} threads, {args.calls} calls "
          "(divide the totals by the calls for per-call times)")
    print(table)


if __name__ == "__main__":
    main()
