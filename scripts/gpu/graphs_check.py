#!/usr/bin/env python3
"""CUDA-graph replay of thunder_rs programs, checked on a GPU against PyTorch and against
thunder with replay off (run in one process; THUNDER_CONFIG as gpu_config.sh writes it):

    python3 scripts/gpu/graphs_check.py

1. A jitted MLP called with new inputs each call (moved, copied into the graph's buffer):
   every call equals PyTorch's, and later calls are graph launches.
2. A large output held across calls: the next call runs region by region and the held output
   keeps its values; once it is dropped, calls replay again.
3. A parameter replaced by a tensor elsewhere: the program captures again and stays right.
4. A tiny GPT-2 training loop (forward, backward, AdamW), graphs on against graphs off in the
   same process (`jit(..., cuda_graphs=True/False)` over two copies of one model): the losses
   agree exactly, and both sides replay after the warm-up.
Prints one line a check and `graphs_check: N failed`; exits 1 when any failed.
"""
import copy
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import thunder_rs

dev = "cuda:0"
failed = 0


def check(name, ok, detail=""):
    global failed
    failed += 0 if ok else 1
    print(f"{'ok  ' if ok else 'FAIL'} {name} {detail}", flush=True)


def stats(fn):
    return thunder_rs.graph_stats(fn)


# 1. New inputs each call.
torch.manual_seed(0)
mlp = nn.Sequential(nn.Linear(256, 1024), nn.GELU(), nn.Linear(1024, 256)).to(dev)
jmlp = thunder_rs.jit(mlp)
worst = 0.0
with torch.no_grad():
    for i in range(6):
        x = torch.randn(64, 256, device=dev)
        y = jmlp(x)
        worst = max(worst, (y - mlp(x)).abs().max().item())
        del y
s = stats(jmlp).get("forward", {})
check("new inputs each call match PyTorch", worst < 1e-4, f"max |diff| {worst:.2e}")
check("later calls are graph launches", s.get("graph_runs", 0) >= 4 and s.get("captures") == 1, str(s))

# 2. A large output held across a call.
big = nn.Linear(1024, 1 << 16, bias=False).to(dev)  # 64 KiB rows: a 16 MiB output for 64 rows
jbig = thunder_rs.jit(big)
with torch.no_grad():
    x = torch.randn(64, 1024, device=dev)
    for _ in range(3):
        out = jbig(x)
        del out
    before = stats(jbig)["forward"]
    held = jbig(x)  # a graph launch
    kept = held.clone()
    x.mul_(2)  # same place, new values
    other = jbig(x)  # `held` is alive: this call must not overwrite it
    torch.cuda.synchronize()
    mid = stats(jbig)["forward"]
    check(
        "a held output is not overwritten by the next call",
        torch.equal(held, kept) and torch.allclose(other, big(x), atol=1e-3, rtol=1e-3),
        f"{before} -> {mid}",
    )
    check("that call ran region by region", mid["eager_runs"] == before["eager_runs"] + 1)
    del held, other, kept
    for _ in range(3):
        out = jbig(x)
        good = torch.allclose(out, big(x), atol=1e-3, rtol=1e-3)
        del out
    after = stats(jbig)["forward"]
    check("once dropped, calls replay again", good and after["graph_runs"] > mid["graph_runs"], str(after))

# 3. A parameter moved to another tensor.
with torch.no_grad():
    x = torch.randn(64, 256, device=dev)
    for _ in range(3):
        jmlp(x)
    n0 = stats(jmlp)["forward"]["captures"]
    mlp[0].weight = nn.Parameter(mlp[0].weight.detach().clone() * 0.5)
    worst = 0.0
    for _ in range(4):
        worst = max(worst, (jmlp(x) - mlp(x)).abs().max().item())
    s = stats(jmlp)["forward"]
    check("a moved parameter is read from its new place", worst < 1e-4, f"max |diff| {worst:.2e}, {s}")
    check("and the program captured again", s["captures"] == n0 + 1, str(s))


# 4. Training: graphs on against off.
class Block(nn.Module):
    def __init__(self, c, h):
        super().__init__()
        self.h = h
        self.ln1, self.ln2 = nn.LayerNorm(c), nn.LayerNorm(c)
        self.attn, self.proj = nn.Linear(c, 3 * c), nn.Linear(c, c)
        self.fc, self.out = nn.Linear(c, 4 * c), nn.Linear(4 * c, c)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.attn(self.ln1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.h, c // self.h).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).contiguous().view(b, t, c))
        return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, vocab=512, c=128, h=4, layers=2, t=64):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, c), nn.Embedding(t, c)
        self.blocks = nn.ModuleList(Block(c, h) for _ in range(layers))
        self.lnf, self.head = nn.LayerNorm(c), nn.Linear(c, vocab, bias=False)

    def forward(self, idx, tgt):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))
        for b in self.blocks:
            x = b(x)
        logits = self.head(self.lnf(x))
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), tgt.view(-1))


def train(model, steps, graphs):
    fn = thunder_rs.jit(model, cuda_graphs=graphs)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=True)
    g = torch.Generator().manual_seed(3)
    losses = []
    for _ in range(steps):
        idx = torch.randint(0, 512, (4, 64), generator=g).to(dev)
        tgt = torch.randint(0, 512, (4, 64), generator=g).to(dev)
        loss = fn(idx, tgt)  # the last step's loss is still held here, as in most loops
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.item())
    return losses, stats(fn)


torch.manual_seed(1)
base = GPT().to(dev).to(torch.bfloat16)
on, s_on = train(copy.deepcopy(base), 12, True)
off, s_off = train(copy.deepcopy(base), 12, False)
check("training losses with graphs equal those without", on == off, f"last {on[-1]:.5f} / {off[-1]:.5f}")
check(
    "both sides replay during training",
    s_on.get("forward", {}).get("graph_runs", 0) >= 8 and s_on.get("backward", {}).get("graph_runs", 0) >= 8,
    str(s_on),
)
check("with cuda_graphs=False nothing replays", s_off == {}, str(s_off))

# Host time of a cached no-grad call, graphs on and off (tiny GPT forward, 2 layers).
for graphs in (True, False):
    m = copy.deepcopy(base)
    fn = thunder_rs.jit(m, cuda_graphs=graphs)
    idx = torch.randint(0, 512, (4, 64), device=dev)
    with torch.no_grad():
        for _ in range(5):
            fn(idx, idx)
        torch.cuda.synchronize()
        t = time.perf_counter()
        for _ in range(50):
            fn(idx, idx)
        host = (time.perf_counter() - t) / 50 * 1e6
        torch.cuda.synchronize()
        wall = (time.perf_counter() - t) / 50 * 1e6
    print(f"tiny GPT-2 forward, no grad, graphs {'on ' if graphs else 'off'}: host {host:.1f} us a call, "
          f"wall {wall:.1f} us ({stats(fn)})")

print(f"graphs_check: {failed} failed")
sys.exit(1 if failed else 0)
