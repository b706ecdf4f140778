#!/usr/bin/env python3
"""Cross-entropy's op pair on the GPU (issue 17): nanoGPT's `F.cross_entropy(logits.float()
.view(-1, V), t)` and edge cases through `thunder run --grad` on cuda:0, compared with PyTorch
on the same inputs, then the loss region's time beside eager at GPT-2's shape.

Checks, per case: the execution trace runs `ltorch.cross_entropy_lse` and
`ltorch.cross_entropy_bwd` on cuda-kernels (the bf16 cases with the converts inside the same
regions); the loss against torch's within 1e-5 relative (f32 loss); the logits' gradient against
torch's (the bf16 gradient rounded the same way) within one bf16 step; an out-of-range target is
an error naming the op.

    python3 scripts/gpu/ce_peer.py --bin .gpu-bin --config gpu-out/plugins-train.toml
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import zlib

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(__file__))
from gpt2_block_peer import cuda_ms  # noqa: E402

# (name, B, T, V, logits dtype, target dtype, ignore_index, targets: "random" | "some ignored"
#  | "all ignored" | "out of range")
CASES = [
    ("gpt2 head bf16 B8 T1024 V50304", 8, 1024, 50304, "bf16", "i64", -100, "random"),
    ("bf16 odd V 4099, ignored rows", 2, 7, 4099, "bf16", "i64", -100, "some ignored"),
    ("f16 V 1000, i32 targets", 3, 5, 1000, "f16", "i32", -100, "some ignored"),
    ("f32 V 777 (no convert)", 1, 9, 777, "f32", "i64", 3, "some ignored"),
    ("bf16 one row", 1, 1, 64, "bf16", "i64", -100, "random"),
    ("bf16 one class", 1, 4, 1, "bf16", "i64", -100, "random"),
    ("bf16 all rows ignored", 1, 4, 32, "bf16", "i64", -100, "all ignored"),
    ("bf16 target out of range", 1, 4, 32, "bf16", "i64", -100, "out of range"),
]
TORCH = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}


def program(B, T, V, dt, ii):
    """logits arrive as f32 (npy has no bf16) and are rounded to `dt` first, as a bf16 model's
    LM head output would be; then nanoGPT's `.float().view(-1, V)` and the loss."""
    lines = ["def ce(x, tgt):"]
    # Trace text has no plain assignment: f32 logits are reshaped directly.
    src = "x"
    if dt != "f32":
        lines.append(f"    lh = ltorch.to(x, dtype=dtypes.{dt})")
        lines.append("    lf = ltorch.to(lh, dtype=dtypes.f32)")
        src = "lf"
    lines += [
        f"    l2 = ltorch.reshape({src}, [{B * T}, {V}])",
        f"    t2 = ltorch.reshape(tgt, [{B * T}])",
        f"    loss = ltorch.cross_entropy(l2, t2, ignore_index={ii}, label_smoothing=0.0)",
        "    return loss",
    ]
    return "\n".join(lines) + "\n"


def targets(rng, B, T, V, ii, kind, dt):
    t = rng.integers(0, V, (B, T), dtype=np.int64)
    if kind == "some ignored":
        t.reshape(-1)[::3] = ii
    elif kind == "all ignored":
        t[:] = ii
    elif kind == "out of range":
        t.reshape(-1)[1] = V + 5
    return t.astype(np.int32 if dt == "i32" else np.int64)


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    return r.returncode, r.stdout + r.stderr


def check_case(a, d, case):
    name, B, T, V, dt, tdt, ii, kind = case
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    x = (rng.standard_normal((B, T, V)) * 2.0).astype(np.float32)
    t = targets(rng, B, T, V, ii, kind, tdt)
    p = os.path.join(d, "ce.py")
    open(p, "w").write(program(B, T, V, dt, ii))
    np.save(os.path.join(d, "x.npy"), x)
    np.save(os.path.join(d, "tgt.npy"), t)
    out = os.path.join(d, "out")
    os.makedirs(out, exist_ok=True)
    for f in os.listdir(out):
        os.remove(os.path.join(out, f))
    rc, text = run([os.path.join(a.bin, "thunder"), "--config", a.config, "run", p, "--grad",
                    "--wrt", "x", "--print-trace", "--device", "cuda:0", "--out", out,
                    "-i", f"x={d}/x.npy", "-i", f"tgt={d}/tgt.npy"])
    if kind == "out of range":
        ok = rc != 0 and "cross_entropy_lse" in text and "out of bounds" in text
        print(f"{name:34} {'ok' if ok else 'FAIL'}: " + (text.strip().splitlines() or ["?"])[-1][:160])
        return ok
    if rc != 0:
        print(f"{name:34} FAIL: thunder run exited {rc}\n{text[-2000:]}")
        return False
    # Which executor ran the two ops (execution trace lines name the executor of each region).
    claimed = {op: False for op in ("cross_entropy_lse", "cross_entropy_bwd")}
    region = None
    for line in text.splitlines():
        m = re.search(r"= ([\w-]+)\.region\d+\(", line)
        if m:
            region = m.group(1)
        for op in claimed:
            if f"ltorch.{op}(" in line and line.lstrip().startswith("#") and region == "cuda-kernels":
                claimed[op] = True
    xt = torch.from_numpy(x).to(TORCH[dt]).float().requires_grad_()
    tt = torch.from_numpy(t).long()
    xl = xt.to(TORCH[dt]) if dt != "f32" else xt
    loss = F.cross_entropy(xl.float().view(-1, V), tt.view(-1), ignore_index=ii)
    loss.backward()
    ref_g = xt.grad.numpy().astype(np.float64)
    got_loss = float(np.load(os.path.join(out, "out_0.npy")))
    got_g = np.load(os.path.join(out, "grad_x.npy")).astype(np.float64)
    ref_loss = float(loss)
    if kind == "all ignored":
        loss_ok = np.isnan(got_loss) and np.isnan(ref_loss)
    else:
        loss_ok = abs(got_loss - ref_loss) <= 1e-5 * abs(ref_loss) + 1e-6
    # One step of the gradient's dtype (bf16: 2^-8 relative), plus what underflows.
    step = {"bf16": 2.0 ** -7, "f16": 2.0 ** -10, "f32": 1e-5}[dt]
    err = np.abs(got_g - ref_g)
    g_ok = bool(np.all(err <= step * np.abs(ref_g) + 1e-7)) and np.isfinite(got_g).all()
    ok = loss_ok and g_ok and all(claimed.values())
    print(f"{name:34} {'ok' if ok else 'FAIL'}: loss {got_loss:.6f} vs torch {ref_loss:.6f}; "
          f"grad max err {float(err.max()):.2e}; cuda-kernels ran {claimed}")
    if not all(claimed.values()):
        print("\n".join(l for l in text.splitlines() if "cross_entropy" in l or "convert" in l)[:3000])
    return ok


def bench(a, d, B=8, T=1024, V=50304, reps=20):
    """The loss alone, fwd+bwd, at GPT-2's shape: thunder's regions beside eager."""
    rng = np.random.default_rng(0)
    np.save(os.path.join(d, "tgt.npy"), rng.integers(0, V, (B, T), dtype=np.int64))
    p = os.path.join(d, "bench.py")
    open(p, "w").write("\n".join([
        "def ce(logits, tgt):",
        "    lf = ltorch.to(logits, dtype=dtypes.f32)",
        f"    l2 = ltorch.reshape(lf, [{B * T}, {V}])",
        f"    t2 = ltorch.reshape(tgt, [{B * T}])",
        "    return ltorch.cross_entropy(l2, t2)",
    ]) + "\n")
    proc = subprocess.run([os.path.join(a.bin, "thunder"), "--config", a.config, "bench", p,
                           "--device", "cuda:0", "--grad", "--json", "--reps", str(reps),
                           "-i", f"logits=randn:bf16[{B},{T},{V}]", "-i", f"tgt={d}/tgt.npy"],
                          capture_output=True, text=True, timeout=300)
    rc, text = proc.returncode, proc.stdout if proc.returncode == 0 else proc.stderr
    logits = torch.randn(B, T, V, device="cuda").bfloat16().requires_grad_()
    tgt = torch.from_numpy(np.load(os.path.join(d, "tgt.npy"))).cuda()

    def step():
        logits.grad = None
        F.cross_entropy(logits.float().view(-1, V), tgt.view(-1)).backward()

    eager, _ = cuda_ms(step, reps)
    copy = 2 * B * T * V * 2 * 2 / 1e9  # fwd reads, bwd reads and writes bf16 logits: GB
    print(f"cross-entropy fwd+bwd bf16 [{B * T}, {V}] on {torch.cuda.get_device_name()}")
    print(f"  eager   {eager:8.3f} ms")
    if rc != 0:
        print(f"  thunder bench failed:\n{text[-3000:]}")
        return False
    r = json.loads(text)
    s = r["steady"]["median_ms"]
    print(f"  thunder {s:8.3f} ms ({s / eager:.2f}x eager); "
          f"{copy:.2f} GB of bf16 logits traffic at least")
    for reg in sorted(r["regions"], key=lambda x: -x["median_ms"])[:8]:
        ops = ", ".join(dict.fromkeys(reg["ops"]))
        print(f"    {reg['pass']:<8} {reg['executor']:<12} {reg['median_ms']:8.3f} ms "
              f"{100 * reg['share']:5.1f}%  {ops[:100]}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"eager_ms": eager, "thunder": r}, f, indent=1)
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", default="target/release")
    ap.add_argument("--config", required=True)
    ap.add_argument("--json", default=None, help="where to write the bench's regions")
    a = ap.parse_args()
    bad = 0
    with tempfile.TemporaryDirectory() as d:
        for case in CASES:
            bad += not check_case(a, d, case)
        bad += not bench(a, d)
    print(f"ce_peer: {bad} failure(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
