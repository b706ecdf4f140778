#!/usr/bin/env python3
"""cuDNN convolutions on the GPU against the interpreter on the CPU (run on the lent machine).

    python3 gpu_check.py --bin DIR [--json out.json]

DIR holds `thunder`, the plugin libraries and `conv_bench`. For each sample (conv1d/2d/3d;
strided, dilated, grouped, depthwise; with and without bias; f32, f16, bf16, f64; an empty
batch) it writes f32/f64 inputs as .npy, runs the same program with `thunder run --device
cuda:0` on the GPU executors alone (cublas, cudnn, cuda-fuser: a prim none of them runs is an
error, never a host fallback) and with `thunder run` on the CPU interpreter, and compares.
f16/bf16 samples convert inside the program, so both sides round the same inputs. Gradient
samples do the same with `--grad`. Then one f16 conv2d is timed against
torch.nn.functional.conv2d.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

# name, dtype, x shape, w shape, bias, stride, padding, dilation, groups
FORWARD = [
    ("conv1d_f32_bias_s2_p3_d2", "f32", [4, 6, 50], [8, 6, 5], True, [2], [3], [2], 1),
    ("conv1d_bf16_groups3", "bf16", [2, 6, 33], [9, 2, 3], False, [1], [1], [1], 3),
    ("conv1d_f16_depthwise", "f16", [3, 8, 40], [8, 1, 7], True, [1], [3], [1], 8),
    ("conv2d_f32_bias", "f32", [2, 3, 16, 16], [8, 3, 3, 3], True, [1, 1], [1, 1], [1, 1], 1),
    ("conv2d_f32_s23_p21_d21", "f32", [2, 4, 17, 15], [6, 4, 3, 2], False, [2, 3], [2, 1], [2, 1], 1),
    ("conv2d_f32_1x1", "f32", [4, 32, 7, 7], [16, 32, 1, 1], True, [1, 1], [0, 0], [1, 1], 1),
    ("conv2d_f32_c128", "f32", [2, 128, 20, 20], [64, 128, 3, 3], True, [1, 1], [1, 1], [1, 1], 1),
    ("conv2d_f16_grouped4_s2", "f16", [2, 8, 12, 12], [12, 2, 3, 3], True, [2, 2], [1, 1], [1, 1], 4),
    ("conv2d_bf16_depthwise5", "bf16", [2, 16, 14, 14], [16, 1, 5, 5], True, [1, 1], [2, 2], [1, 1], 16),
    ("conv2d_f16_resnet", "f16", [8, 64, 28, 28], [64, 64, 3, 3], True, [1, 1], [1, 1], [1, 1], 1),
    ("conv2d_bf16_dilated", "bf16", [2, 16, 20, 20], [32, 16, 3, 3], False, [1, 1], [2, 2], [2, 2], 1),
    ("conv2d_f64_bias", "f64", [2, 3, 9, 9], [4, 3, 3, 3], True, [1, 1], [1, 1], [1, 1], 1),
    ("conv2d_f64_grouped", "f64", [2, 4, 9, 9], [6, 2, 3, 3], False, [2, 1], [0, 1], [1, 2], 2),
    ("conv3d_f32_bias", "f32", [2, 3, 6, 7, 8], [4, 3, 3, 3, 3], True, [1, 1, 1], [1, 1, 1], [1, 1, 1], 1),
    ("conv3d_f16_s2_groups2", "f16", [1, 4, 8, 8, 8], [8, 2, 3, 3, 3], False, [2, 2, 2], [1, 1, 1], [1, 1, 1], 2),
    ("conv3d_bf16_dilated", "bf16", [1, 4, 9, 9, 9], [4, 4, 2, 3, 3], True, [1, 1, 2], [0, 1, 1], [2, 1, 1], 1),
    ("conv3d_f64", "f64", [1, 2, 5, 5, 5], [3, 2, 3, 3, 3], True, [1, 1, 1], [1, 1, 1], [1, 1, 1], 1),
    ("conv2d_f32_empty_batch", "f32", [0, 3, 8, 8], [4, 3, 3, 3], True, [1, 1], [1, 1], [1, 1], 1),
]

# Gradients (--grad, with respect to x, w and b): loss = mean(conv(x, w, b) * r).
GRAD = [
    ("grad_conv2d_f32_s1_p1", "f32", [2, 3, 10, 10], [4, 3, 3, 3], True, [1, 1], [1, 1], [1, 1], 1),
    ("grad_conv1d_f32_d2", "f32", [2, 4, 20], [6, 4, 3], True, [1], [2], [2], 1),
    ("grad_conv2d_f32_groups2", "f32", [2, 4, 9, 9], [6, 2, 3, 3], False, [1, 1], [1, 1], [1, 1], 2),
    ("grad_conv2d_f32_stride2", "f32", [2, 3, 10, 10], [4, 3, 3, 3], True, [2, 2], [1, 1], [1, 1], 1),
    ("grad_conv3d_f32", "f32", [1, 2, 5, 6, 7], [3, 2, 3, 3, 3], True, [1, 1, 1], [1, 1, 1], [1, 1, 1], 1),
]

TOL = {"f32": 1e-4, "f64": 1e-10, "f16": 5e-3, "bf16": 3e-2}
GPU_EXECUTORS = "cublas,cudnn,cuda-fuser"


def out_shape(x, w, s, p, d):
    return [x[0], w[0]] + [(x[2 + i] + 2 * p[i] - d[i] * (w[2 + i] - 1) - 1) // s[i] + 1
                           for i in range(len(s))]


def dims(shape):
    return ", ".join(map(str, shape))


def program(case, grad):
    name, dt, x, w, bias, s, p, d, g = case
    io = "f64" if dt == "f64" else "f32"
    inputs = [("x", x), ("w", w)] + ([("b", [w[0]])] if bias else [])
    if grad:
        inputs.append(("r", out_shape(x, w, s, p, d)))
    lines = ["def computation(%s):" % ", ".join(n for n, _ in inputs)]
    lines += ['  # %s: "cpu %s[%s]"' % (n, io, dims(sh)) for n, sh in inputs]
    cast = dt not in ("f32", "f64")
    names = {}
    for n, _ in inputs[:3 if bias else 2]:
        if cast:
            lines.append("  %sc = prims.convert_element_type(%s, dtypes.%s)" % (n, n, dt))
            names[n] = n + "c"
        else:
            names[n] = n
    b = names.get("b", "None")
    lines.append("  y = prims.convolution(%s, %s, %s, [%s], [%s], [%s], %d)"
                 % (names["x"], names["w"], b, dims(s), dims(p), dims(d), g))
    out = "y"
    if cast:
        lines.append("  yo = prims.convert_element_type(y, dtypes.%s)" % io)
        out = "yo"
    if grad:
        lines.append("  yr = ltorch.mul(%s, r)" % out)
        lines.append("  loss = ltorch.mean(yr, None, False)")
        out = "loss"
    lines.append("  return (%s,)" % out)
    return "\n".join(lines) + "\n", inputs, io


def rel_err(got, want):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    if got.shape != want.shape:
        return float("inf")
    if not want.size:
        return 0.0
    return float(np.max(np.abs(got - want)) / max(np.max(np.abs(want)), 1e-30))


def thunder(bin_dir, config, args, gpu):
    env = dict(os.environ, THUNDER_CONFIG=config)
    if gpu:
        env["THUNDER_EXECUTORS"] = GPU_EXECUTORS
    return subprocess.run([os.path.join(bin_dir, "thunder")] + args, capture_output=True,
                          text=True, env=env)


def check(case, grad, bin_dir, config, work, rng):
    name, dt = case[0], case[1]
    text, inputs, io = program(case, grad)
    d = os.path.join(work, name)
    os.makedirs(os.path.join(d, "gpu"), exist_ok=True)
    os.makedirs(os.path.join(d, "cpu"), exist_ok=True)
    path = os.path.join(d, "program.trace")
    with open(path, "w") as f:
        f.write(text)
    args = []
    for n, sh in inputs:
        a = (rng.standard_normal(sh) * (0.3 if n == "w" else 1.0)).astype(np.float64 if io == "f64" else np.float32)
        np.save(os.path.join(d, n + ".npy"), a)
        args += ["-i", "%s=%s" % (n, os.path.join(d, n + ".npy"))]
    extra = ["--grad", "--wrt", "x,w" + (",b" if case[4] else "")] if grad else []
    row = {"sample": name, "dtype": dt, "grad": grad}
    gpu = thunder(bin_dir, config, ["run", path, "--device", "cuda:0", "--print-trace",
                                    "--out", os.path.join(d, "gpu")] + extra + args, True)
    if gpu.returncode != 0:
        row["error"] = (gpu.stderr.strip().splitlines() or ["?"])[-1][:400]
        return row
    row["executors"] = sorted(set(re.findall(r"\b(cudnn|cuda-fuser|cublas|cuda-kernels|interpreter|cpu-simd)\b", gpu.stdout)))
    row["cudnn_regions"] = len(re.findall(r"\bcudnn\b", gpu.stdout))
    row["trace"] = gpu.stdout
    cpu = thunder(bin_dir, config, ["run", path, "--out", os.path.join(d, "cpu")] + extra + args, False)
    if cpu.returncode != 0:
        row["error"] = "interpreter: " + (cpu.stderr.strip().splitlines() or ["?"])[-1][:300]
        return row
    files = ["out_0.npy"] + (["grad_%s.npy" % n for n in ("x", "w", "b") if n != "b" or case[4]] if grad else [])
    errs = {}
    for f in files:
        errs[f[:-4]] = rel_err(np.load(os.path.join(d, "gpu", f)), np.load(os.path.join(d, "cpu", f)))
    row["rel_err"] = errs
    row["ok"] = all(e <= TOL[dt] for e in errs.values()) and "interpreter" not in row["executors"]
    return row


def time_torch(dtype_name, n, c, h, w, co, k, reps=200):
    import torch
    import torch.nn.functional as F
    dt = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}[dtype_name]
    x = torch.randn(n, c, h, w, device="cuda", dtype=dt)
    wt = torch.randn(co, c, k, k, device="cuda", dtype=dt)
    torch.backends.cudnn.allow_tf32 = False  # as thunder's f32 (FMA math)
    out = {}
    for bench in (False, True):
        torch.backends.cudnn.benchmark = bench
        for _ in range(5):
            F.conv2d(x, wt, None, 1, k // 2)
        torch.cuda.synchronize()
        samples = []
        for _ in range(5):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            for _ in range(reps):
                F.conv2d(x, wt, None, 1, k // 2)
            e.record()
            torch.cuda.synchronize()
            samples.append(s.elapsed_time(e) / reps)
        samples.sort()
        out["benchmark" if bench else "default"] = samples[len(samples) // 2]
    torch.backends.cudnn.benchmark = False
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--json")
    args = ap.parse_args()
    bin_dir = os.path.abspath(args.bin)
    rng = np.random.default_rng(0)
    rows = []
    with tempfile.TemporaryDirectory() as work:
        config = os.path.join(work, "plugins.toml")
        with open(config, "w") as f:
            f.write('plugin_dirs = ["%s"]\n' % bin_dir)
            for n, p in (("cublas", 40), ("cudnn", 35), ("cuda-fuser", 30), ("interpreter", 0)):
                f.write('[[executor]]\nname = "%s"\npriority = %d\n' % (n, p))
        for case in FORWARD:
            rows.append(check(case, False, bin_dir, config, work, rng))
        for case in GRAD:
            rows.append(check(case, True, bin_dir, config, work, rng))
        for r in rows:
            if "error" in r:
                print("%-28s %-5s ERROR %s" % (r["sample"], r["dtype"], r["error"]))
            else:
                print("%-28s %-5s %s rel err %s executors %s (cudnn regions %d)"
                      % (r["sample"], r["dtype"], "OK  " if r["ok"] else "DIFF",
                         ", ".join("%s %.1e" % kv for kv in r["rel_err"].items()),
                         ",".join(r["executors"]), r["cudnn_regions"]))
        fwd = [r for r in rows if not r["grad"]]
        print("forward: %d/%d agree" % (sum(1 for r in fwd if r.get("ok")), len(fwd)))
        grads = [r for r in rows if r["grad"]]
        print("grad: %d/%d agree" % (sum(1 for r in grads if r.get("ok")), len(grads)))
        # Timing: one f16 conv2d, N32 C64 H56 W56, 64 filters 3x3, padding 1.
        timing = {}
        for dt in ("f16", "f32"):
            bench = subprocess.run([os.path.join(bin_dir, "conv_bench"), config, dt, "32", "64", "56", "56", "64", "3", "200"],
                                   capture_output=True, text=True, env=dict(os.environ, THUNDER_EXECUTORS=GPU_EXECUTORS))
            print(bench.stdout.strip() or bench.stderr.strip()[-400:])
            m = re.search(r"([\d.]+) ms/call", bench.stdout)
            try:
                t = time_torch(dt, 32, 64, 56, 56, 64, 3)
            except Exception as e:  # noqa: BLE001
                t = {"error": str(e)}
            print("torch %s conv2d N32 C64 H56 W56 Cout64 K3: %s ms/call" % (dt, t))
            timing[dt] = {"thunder_ms": float(m.group(1)) if m else None, "torch_ms": t}
            if m and "default" in t:
                print("  thunder / torch (cudnn.benchmark=False): %.3f, (benchmark=True): %.3f"
                      % (float(m.group(1)) / t["default"], float(m.group(1)) / t["benchmark"]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows, "timing": timing}, f, indent=1)
    sys.exit(0 if all(r.get("ok") for r in fwd) else 1)


if __name__ == "__main__":
    main()
