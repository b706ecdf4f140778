#!/usr/bin/env python3
"""GPT-2 (nanoGPT's model, random weights) through thunder_rs from Python: the first call
(tracing on meta + compiling + one run) and cached calls, forward-only and forward+backward,
and a train step from Python against the same compiled programs called directly.

    python benches/peer/python_gpt.py [--small] [--seq T] [--batch B] [--reps N]

Default: a 2-layer, 128-wide model; --small: GPT-2 small (12 layers, 768 wide, vocab 50304).
Needs the thunder_rs wheel installed (scripts/python_ci.sh builds it).
"""

import argparse
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python", "tests"))
import thunder_rs  # noqa: E402
from test_models import Block  # noqa: E402  (nanoGPT's block, as the tests use it)


class GPT(nn.Module):
    def __init__(self, vocab, block_size, n_layer, n_embd, n_head):
        super().__init__()
        self.wte = nn.Embedding(vocab, n_embd)
        self.wpe = nn.Embedding(block_size, n_embd)
        self.h = nn.ModuleList([Block(n_embd, n_head, block_size) for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(n_embd)
        self.lm_head = nn.Linear(n_embd, vocab, bias=False)
        self.lm_head.weight = self.wte.weight  # tied, as nanoGPT

    def forward(self, idx, targets):
        b, t = idx.size()
        pos = torch.arange(0, t, dtype=torch.long, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for blk in self.h:
            x = blk(x)
        logits = self.lm_head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


def timed(f):
    t0 = time.perf_counter()
    r = f()
    return r, time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--small", action="store_true", help="GPT-2 small instead of the tiny default")
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args()
    cfg = dict(vocab=50304, block_size=1024, n_layer=12, n_embd=768, n_head=12) if a.small else \
        dict(vocab=512, block_size=256, n_layer=2, n_embd=128, n_head=4)
    torch.manual_seed(0)
    model = GPT(**cfg)
    idx = torch.randint(0, cfg["vocab"], (a.batch, a.seq))
    tgt = torch.randint(0, cfg["vocab"], (a.batch, a.seq))
    print(f"# GPT {cfg}, batch {a.batch}, seq {a.seq}, torch {torch.__version__}, {torch.get_num_threads()} threads")

    _, host = timed(thunder_rs.plugins)
    print(f"plugin host load (once per process): {host:.3f} s")
    with torch.no_grad():
        jm = thunder_rs.jit(model)
        loss, first = timed(lambda: jm(idx, tgt))
        _, cached = timed(lambda: jm(idx, tgt))
        ref = model(idx, tgt)
    print(f"forward, no grad:   first call {first:.3f} s, cached call {cached:.3f} s "
          f"(loss {loss.item():.4f}, torch {ref.item():.4f})")

    jm = thunder_rs.jit(model)
    loss, first = timed(lambda: jm(idx, tgt))
    _, bwd = timed(lambda: loss.backward())
    print(f"forward + backward: first call {first:.3f} s (trace, grad transform, compile both, run forward), "
          f"first backward {bwd:.3f} s")
    if hasattr(jm._last.program, "timings"):
        stages = ", ".join(f"{s} {t * 1e3:.1f} ms" for s, t in jm._last.program.timings())
        print(f"  building the programs (Rust): {stages}")

    opt = torch.optim.SGD(model.parameters(), lr=1e-4)

    def step():
        opt.zero_grad(set_to_none=True)
        jm(idx, tgt).backward()
        opt.step()

    def fwd_bwd():
        jm(idx, tgt).backward()

    def eager_step():
        opt.zero_grad(set_to_none=True)
        model(idx, tgt).backward()
        opt.step()

    entry = jm._last
    named = jm._named_inputs()
    from thunder_rs._jit import _from_dlpack, _to_dlpack

    tensors = [idx, tgt] + [t for _, t in named] + entry.captured

    def programs_only():
        outs, saved = entry.program.forward([_to_dlpack(t.detach().contiguous()) for t in tensors])
        cot = torch.ones((), dtype=torch.float32)
        entry.program.backward(saved, [_to_dlpack(cot)])

    for name, f in [("train step from Python (jit + backward + SGD)", step),
                    ("forward + backward from Python (jit + loss.backward())", fwd_bwd),
                    ("the same forward+backward programs called directly", programs_only),
                    ("torch eager train step", eager_step)]:
        f()
        best = min(timed(f)[1] for _ in range(a.reps))
        print(f"{name:55s} {best * 1e3:9.2f} ms")


if __name__ == "__main__":
    main()
