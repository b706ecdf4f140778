#!/usr/bin/env python3
"""GPT-2 small's non-block part forward and backward on the GPU: token embedding, final layer
norm, the tied LM head over the vocabulary and cross-entropy in f32 (nanoGPT's `.float()`),
thunder beside PyTorch eager in the same run, with thunder's most expensive regions.

The training step minus twelve blocks is this program: where thunder loses time outside the
blocks shows up here.

    python3 scripts/gpu/gpt2_head_peer.py --bin .gpu-bin --config gpu-out/plugins-train.toml
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(__file__))
from gpt2_block_peer import cuda_ms  # noqa: E402


def program(B, T, C, V):
    return "\n".join([
        "def head(idx, tgt, wte, x, ln_w, ln_b):",
        "    e = ltorch.embedding(idx, wte)",
        "    h0 = ltorch.add(x, e)",
        f"    h = ltorch.layer_norm(h0, [{C}], weight=ln_w, bias=ln_b)",
        "    logits = ltorch.linear(h, wte)",
        "    lf = ltorch.to(logits, dtype=dtypes.f32)",
        f"    l2 = ltorch.reshape(lf, [{B * T}, {V}])",
        f"    t2 = ltorch.reshape(tgt, [{B * T}])",
        "    loss = ltorch.cross_entropy(l2, t2)",
        "    return loss",
    ]) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", default="target/release")
    ap.add_argument("--config", default=None)
    ap.add_argument("--shape", default="8,1024,768,50304", help="B,T,C,V")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    B, T, C, V = map(int, a.shape.split(","))
    rng = np.random.default_rng(0)
    idx = rng.integers(0, V, (B, T), dtype=np.int64)
    tgt = rng.integers(0, V, (B, T), dtype=np.int64)
    with tempfile.TemporaryDirectory() as d:
        prog = os.path.join(d, "gpt2_head.py")
        with open(prog, "w") as f:
            f.write(program(B, T, C, V))
        np.save(os.path.join(d, "idx.npy"), idx)
        np.save(os.path.join(d, "tgt.npy"), tgt)
        cmd = [os.path.join(a.bin, "thunder")] + (["--config", a.config] if a.config else [])
        cmd += ["bench", prog, "--device", "cuda:0", "--grad", "--json", "--reps", str(a.reps),
                "-i", f"idx={d}/idx.npy", "-i", f"tgt={d}/tgt.npy",
                "-i", f"wte=randn:bf16[{V},{C}]", "-i", f"x=randn:bf16[{B},{T},{C}]",
                "-i", f"ln_w=randn:bf16[{C}]", "-i", f"ln_b=randn:bf16[{C}]"]
        proc = subprocess.run(cmd, capture_output=True, text=True)
    thunder = None
    if proc.returncode != 0:
        print("thunder bench failed:\n" + proc.stderr[-4000:])
    else:
        thunder = json.loads(proc.stdout)
        if a.json:
            with open(a.json, "w") as f:
                json.dump(thunder, f, indent=1)
    dev = "cuda"
    g = torch.Generator(device=dev).manual_seed(0)
    wte = (torch.randn(V, C, device=dev, generator=g) * 0.02).bfloat16().requires_grad_()
    x = torch.randn(B, T, C, device=dev, generator=g).bfloat16().requires_grad_()
    ln_w = torch.ones(C, device=dev).bfloat16().requires_grad_()
    ln_b = torch.zeros(C, device=dev).bfloat16().requires_grad_()
    ti, tt = torch.from_numpy(idx).to(dev), torch.from_numpy(tgt).to(dev)

    def step():
        for p in (wte, x, ln_w, ln_b):
            p.grad = None
        h = F.layer_norm(x + F.embedding(ti, wte), [C], ln_w, ln_b)
        F.cross_entropy(F.linear(h, wte).float().view(-1, V), tt.view(-1)).backward()

    torch.cuda.reset_peak_memory_stats()
    eager, _ = cuda_ms(step, a.reps)
    print(f"GPT-2 head fwd+bwd bf16 B{B} T{T} C{C} V{V} on {torch.cuda.get_device_name()}")
    print(f"  eager   {eager:8.3f} ms  peak {torch.cuda.max_memory_allocated() / 2**20:.0f} MiB")
    if thunder:
        s = thunder["steady"]
        print(f"  thunder {s['median_ms']:8.3f} ms  ({s['median_ms'] / eager:.2f}x eager)")
        for r in sorted(thunder["regions"], key=lambda r: -r["median_ms"])[:12]:
            ops = ", ".join(dict.fromkeys(r["ops"]))
            print(f"    {r['pass']:<8} {r['executor']:<12} {r['median_ms']:8.3f} ms "
                  f"{100 * r['share']:5.1f}%  {ops[:110]}")
    return 0 if thunder else 1


if __name__ == "__main__":
    sys.exit(main())
