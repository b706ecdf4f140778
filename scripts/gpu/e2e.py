#!/usr/bin/env python3
"""Whole programs on the GPU, forward and backward, against PyTorch (run on the lent machine).

    python3 scripts/gpu/e2e.py --bin .gpu-bin --config gpu-out/plugins.toml [--json out.json]

For each program (an MLP, a CNN with conv2d/batch_norm/max_pool2d/cross_entropy, a GPT-2 block
with layer_norm/linear/causal SDPA/tanh-GELU/residuals, each a training loss) it writes random
inputs as .npy, runs `thunder run --device cuda:0 --grad --print-trace`, and compares the loss
and every gradient with PyTorch on the same inputs (float64 on the CPU, so the reference is not
itself rounded). It prints one row per program: max relative error of the loss and of the
gradients, the executors the execution traces name, and whether any region fell to the CPU
interpreter (none may: no silent host fallback).
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torch.nn.functional as F


def program(inputs, body, out):
    lines = ["def computation(%s):" % ", ".join(n for n, _ in inputs)]
    lines += ['  # %s: "cpu %s"' % (n, t) for n, t in inputs]
    lines += ["  " + l for l in body]
    lines.append("  return (%s,)" % out)
    return "\n".join(lines) + "\n"


def shape_of(t):
    dt, dims = t.split("[")
    dims = dims.rstrip("]")
    return dt, [int(d) for d in dims.split(",")] if dims.strip() else []


def mlp():
    B, I, H, O = 64, 64, 128, 10
    inputs = [("x", "f32[%d, %d]" % (B, I)), ("w1", "f32[%d, %d]" % (H, I)), ("b1", "f32[%d]" % H),
              ("w2", "f32[%d, %d]" % (O, H)), ("b2", "f32[%d]" % O), ("y", "i64[%d]" % B)]
    body = ["h = ltorch.linear(x, w1, b1)", "r = ltorch.relu(h)", "o = ltorch.linear(r, w2, b2)",
            "loss = ltorch.cross_entropy(o, y)"]

    def ref(t):
        return F.cross_entropy(F.linear(F.relu(F.linear(t["x"], t["w1"], t["b1"])), t["w2"], t["b2"]), t["y"])

    return "mlp", inputs, body, ref, {"y": O}


def cnn():
    inputs = [("x", "f32[8, 3, 16, 16]"), ("w", "f32[8, 3, 3, 3]"), ("cb", "f32[8]"),
              ("g", "f32[8]"), ("b", "f32[8]"), ("fw", "f32[10, 512]"), ("fb", "f32[10]"),
              ("y", "i64[8]")]
    body = ["c = ltorch.conv2d(x, w, cb, [1, 1], [1, 1], [1, 1], 1)",
            "n = ltorch.batch_norm(c, None, None, g, b, True, 0.1, 1e-05)",
            "r = ltorch.relu(n)",
            "p = ltorch.max_pool2d(r, [2, 2], [2, 2], [0, 0], [1, 1], False)",
            "f = ltorch.reshape(p, [8, 512])",
            "o = ltorch.linear(f, fw, fb)",
            "loss = ltorch.cross_entropy(o, y)"]

    def ref(t):
        c = F.conv2d(t["x"], t["w"], t["cb"], 1, 1)
        n = F.batch_norm(c, None, None, t["g"], t["b"], True, 0.1, 1e-5)
        p = F.max_pool2d(F.relu(n), 2, 2)
        return F.cross_entropy(F.linear(p.reshape(8, 512), t["fw"], t["fb"]), t["y"])

    return "cnn", inputs, body, ref, {"y": 10}


def gpt2_block():
    B, T, C, H = 2, 64, 128, 4
    D = C // H
    f = lambda s: "f32[%s]" % ", ".join(map(str, s))
    inputs = [("x", f([B, T, C])), ("ln1_w", f([C])), ("ln1_b", f([C])),
              ("w_qkv", f([3 * C, C])), ("b_qkv", f([3 * C])), ("w_o", f([C, C])), ("b_o", f([C])),
              ("ln2_w", f([C])), ("ln2_b", f([C])), ("w_fc", f([4 * C, C])), ("b_fc", f([4 * C])),
              ("w_pr", f([C, 4 * C])), ("b_pr", f([C])), ("r", f([B, T, C]))]
    body = ["h = ltorch.layer_norm(x, [%d], ln1_w, ln1_b, 1e-05)" % C,
            "qkv = ltorch.linear(h, w_qkv, b_qkv)",
            "q, k, v = ltorch.split(qkv, [%d, %d, %d], 2)" % (C, C, C)]
    for n in "qkv":
        body += ["%s4 = ltorch.reshape(%s, [%d, %d, %d, %d])" % (n, n, B, T, H, D),
                 "%sh = ltorch.permute(%s4, [0, 2, 1, 3])" % (n, n)]
    body += ["att = ltorch.scaled_dot_product_attention(qh, kh, vh, None, True, None)",
             "at = ltorch.permute(att, [0, 2, 1, 3])",
             "a2 = ltorch.reshape(at, [%d, %d, %d])" % (B, T, C),
             "o = ltorch.linear(a2, w_o, b_o)",
             "x1 = ltorch.add(x, o)",
             "h2 = ltorch.layer_norm(x1, [%d], ln2_w, ln2_b, 1e-05)" % C,
             "fc = ltorch.linear(h2, w_fc, b_fc)",
             "gl = ltorch.gelu(fc, \"tanh\")",
             "pr = ltorch.linear(gl, w_pr, b_pr)",
             "y = ltorch.add(x1, pr)",
             "yr = ltorch.mul(y, r)",
             "loss = ltorch.mean(yr, None, False)"]

    def ref(t):
        h = F.layer_norm(t["x"], [C], t["ln1_w"], t["ln1_b"], 1e-5)
        q, k, v = F.linear(h, t["w_qkv"], t["b_qkv"]).split([C, C, C], 2)
        heads = lambda z: z.reshape(B, T, H, D).permute(0, 2, 1, 3)
        att = F.scaled_dot_product_attention(heads(q), heads(k), heads(v), is_causal=True)
        x1 = t["x"] + F.linear(att.permute(0, 2, 1, 3).reshape(B, T, C), t["w_o"], t["b_o"])
        h2 = F.layer_norm(x1, [C], t["ln2_w"], t["ln2_b"], 1e-5)
        y = x1 + F.linear(F.gelu(F.linear(h2, t["w_fc"], t["b_fc"]), approximate="tanh"), t["w_pr"], t["b_pr"])
        return (y * t["r"]).mean()

    return "gpt2_block", inputs, body, ref, {}


def rel_err(got, want, floor=1e-12):
    """Max error relative to the reference's largest magnitude (at least `floor`: a gradient
    that is zero in exact arithmetic, like a conv bias before batch_norm, is compared with the
    scale of the loss instead of with its own rounding noise)."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    if not want.size:
        return 0.0
    return float(np.max(np.abs(got - want)) / max(np.max(np.abs(want)), floor))


def run_case(case, bin_dir, config, work, rng, device):
    name, inputs, body, ref, int_ranges = case
    d = os.path.join(work, name)
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "program.trace")
    with open(path, "w") as f:
        f.write(program(inputs, body, "loss"))
    arrays, args = {}, []
    for n, t in inputs:
        dt, shape = shape_of(t)
        if dt == "i64":
            a = rng.integers(0, int_ranges[n], size=shape).astype(np.int64)
        else:
            a = (rng.standard_normal(shape) * (0.5 if n.startswith("w") else 1.0)).astype(np.float32)
        arrays[n] = a
        np.save(os.path.join(d, n + ".npy"), a)
        args += ["-i", "%s=%s" % (n, os.path.join(d, n + ".npy"))]
    cmd = [os.path.join(bin_dir, "thunder"), "--config", config, "run", path, "--device", device,
           "--grad", "--print-trace", "--out", d] + args
    proc = subprocess.run(cmd, capture_output=True, text=True)
    row = {"program": name}
    if proc.returncode != 0:
        row["error"] = (proc.stderr.strip().splitlines() or ["?"])[-1][:300]
        return row
    execs = sorted(set(re.findall(r"# (?:region|executor)[: ]+([\w-]+)", proc.stdout)) |
                   set(re.findall(r"\b(cuda-fuser|cuda-kernels|cudnn|cublas|triton|interpreter|cpu-simd)\b", proc.stdout)))
    row["executors"] = execs
    row["host_fallback"] = any(e in ("interpreter", "cpu-simd") for e in execs)
    t = {n: torch.tensor(a, dtype=torch.float64 if a.dtype == np.float32 else torch.int64)
         for n, a in arrays.items()}
    for n, a in t.items():
        if a.is_floating_point():
            a.requires_grad_(True)
    loss = ref(t)
    loss.backward()
    row["loss"] = float(np.load(os.path.join(d, "out_0.npy")))
    row["loss_ref"] = float(loss.detach())
    row["loss_rel_err"] = rel_err(row["loss"], row["loss_ref"])
    worst, errs = 0.0, {}
    for n, a in t.items():
        if a.grad is not None:
            g = np.load(os.path.join(d, "grad_%s.npy" % n))
            errs[n] = rel_err(g, a.grad.numpy(), floor=1e-3 * abs(row["loss_ref"]) / a.numel() ** 0.5)
            worst = max(worst, errs[n])
    row["grad_rel_err"] = errs
    row["grad_max_rel_err"] = worst
    on_gpu = device.startswith("cuda")
    row["ok"] = row["loss_rel_err"] < 1e-4 and worst < 1e-3 and not (on_gpu and row["host_fallback"])
    return row


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="target/release")
    ap.add_argument("--config", required=True)
    ap.add_argument("--json")
    ap.add_argument("--device", default="cuda:0", help="cpu checks the programs themselves")
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    rng = np.random.default_rng(0)
    rows = []
    with tempfile.TemporaryDirectory() as work:
        for case in (mlp(), cnn(), gpt2_block()):
            row = run_case(case, args.bin, args.config, work, rng, args.device)
            rows.append(row)
            if "error" in row:
                print("%-11s ERROR %s" % (row["program"], row["error"]))
            else:
                print("%-11s loss %.6g (torch %.6g) rel %.1e, grads max rel %.1e, host fallback %s, %s, executors: %s"
                      % (row["program"], row["loss"], row["loss_ref"], row["loss_rel_err"],
                         row["grad_max_rel_err"], row["host_fallback"], "OK" if row["ok"] else "MISMATCH",
                         ", ".join(row["executors"])))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    sys.exit(0 if all(r.get("ok") for r in rows) else 1)


if __name__ == "__main__":
    main()
