#!/usr/bin/env python3
"""Column reductions of cuda-fuser (issue 17: bias and layer_norm weight gradients, sums over
the leading dims of [8, 1024, C]) on cuda:0: correctness, then time against the copy floor.

Correctness, per case:
- `thunder examine --device cuda:0` (every dtype): the fused kernel's outputs against the
  interpreter on the CPU, examine's tolerances;
- f32 cases also against PyTorch: the same inputs (.npy) through `thunder run --device cuda:0`,
  compared with torch on cuda:0 in f64 (bf16 has no .npy dtype, so bf16 is checked by examine).
Timing: `thunder bench --json` (the one region's median) beside the same ops in PyTorch eager
on the same shapes, and the floor: the bytes the kernel must move (inputs read once, outputs
written once) over the copy bandwidth measured here (a 256 MiB clone).

    python3 scripts/gpu/columns_check.py --bin NAME=DIR:CONFIG [--bin NAME2=DIR2:CONFIG2] [--only SUBSTR ...]

Several --bin (thunder builds, e.g. main and this branch) are timed in the same run;
correctness is checked with the first. Exit status 1 if any check fails.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

DT = {"bf16": torch.bfloat16, "f32": torch.float32}
NP = {"f32": np.float32}


def bench_ms(fn, reps=30):
    if not torch.cuda.is_available():
        # --device cpu: a dry run of the script itself (wall-clock times).
        import time
        ts = []
        for _ in range(3):
            t0 = time.perf_counter()
            fn()
            ts.append((time.perf_counter() - t0) * 1e3)
        return sorted(ts)[1]
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        ts.append(s.elapsed_time(e))
    ts.sort()
    return ts[len(ts) // 2]


def cases():
    """(name, dtype, shape, reduced dims, kind, check shape). kinds: `sum` (sum only), `mul`
    (g * x stored and summed: a bias gradient with a full-size elementwise output), `add3`
    (a + b + c stored and summed: the dump's GELU-backward region shape), `ln` (layer_norm
    weight and bias gradients: sum(g * (x - m) * s), sum(g); m, s per token). The check shape
    (correctness; the interpreter runs it on the CPU) keeps the columns and fewer rows, still
    enough to split the reduced dim; the timed shape is the model's."""
    out = []
    for dt in ("bf16", "f32"):
        out += [
            (f"bias grad + product {dt} 8x1024x768", dt, [8, 1024, 768], [0, 1], "mul", [8, 1024, 768]),
            (f"bias grad {dt} 8x1024x768", dt, [8, 1024, 768], [0, 1], "sum", [8, 1024, 768]),
            (f"bias grad + sum3 {dt} 8x1024x2304", dt, [8, 1024, 2304], [0, 1], "add3", [2, 1024, 2304]),
            (f"bias grad {dt} 8192x3072", dt, [8192, 3072], [0], "sum", [1024, 3072]),
            (f"bias grad + product {dt} 8192x3072", dt, [8192, 3072], [0], "mul", [1024, 3072]),
            (f"ln w/b grads {dt} 8x1024x768", dt, [8, 1024, 768], [0, 1], "ln", [4, 1024, 768]),
            (f"odd cols {dt} 4096x1000 + product", dt, [4096, 1000], [0], "mul", [4096, 1000]),
            (f"odd cols {dt} 2048x50257", dt, [2048, 50257], [0], "sum", [64, 50257]),
            (f"odd cols {dt} 2048x50257 + product", dt, [2048, 50257], [0], "mul", [64, 50257]),
            (f"odd cols split {dt} 8192x1001 + product", dt, [8192, 1001], [0], "mul", [4096, 1001]),
        ]
    return out


def program(c):
    name, dt, shape, dims, kind = c[:5]
    d = f"[{', '.join(map(str, dims))}]"
    if kind == "sum":
        return ["g"], f"def f(g):\n    return ltorch.sum(g, {d}, False)\n"
    if kind == "mul":
        return ["g", "x"], (f"def f(g, x):\n    t0 = ltorch.mul(g, x)\n"
                            f"    t1 = ltorch.sum(t0, {d}, False)\n    return (t0, t1)\n")
    if kind == "add3":
        return ["a", "b", "c"], (f"def f(a, b, c):\n    t0 = ltorch.add(ltorch.add(a, b), c)\n"
                                 f"    t1 = ltorch.sum(t0, {d}, False)\n    return (t0, t1)\n")
    if kind == "ln":
        return ["g", "x", "m", "s"], (
            f"def f(g, x, m, s):\n    t0 = ltorch.mul(g, ltorch.mul(ltorch.sub(x, m), s))\n"
            f"    return (ltorch.sum(t0, {d}, False), ltorch.sum(g, {d}, False))\n")
    raise ValueError(kind)


def shapes_of(c, names, check=False):
    shape = c[5] if check else c[2]
    tok = shape[:-1] + [1]
    return {n: (tok if n in ("m", "s") else shape) for n in names}


def torch_fn(c):
    dims = tuple(c[3])
    kind = c[4]
    if kind == "sum":
        return lambda t: (t["g"].sum(dims),)
    if kind == "mul":
        return lambda t: ((p := t["g"] * t["x"]), p.sum(dims))
    if kind == "add3":
        return lambda t: ((p := t["a"] + t["b"] + t["c"]), p.sum(dims))
    return lambda t: ((t["g"] * ((t["x"] - t["m"]) * t["s"])).sum(dims), t["g"].sum(dims))


def floor_bytes(c, tensors, outs):
    return sum(t.numel() * t.element_size() for t in tensors.values()) + sum(
        o.numel() * o.element_size() for o in outs)


def run(cmd, stdout_only=False):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    return r.returncode, (r.stdout if stdout_only else r.stdout + r.stderr)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", action="append", required=True, help="NAME=DIR:CONFIG")
    ap.add_argument("--only", nargs="*", default=[])
    ap.add_argument("--no-check", action="store_true")
    ap.add_argument("--device", default="cuda:0", help="cpu: a dry run of the script (interpreter)")
    ap.add_argument("--json")
    a = ap.parse_args()
    bins = [(b.split("=", 1)[0],) + tuple(b.split("=", 1)[1].split(":", 1)) for b in a.bin]
    dev = a.device
    big = torch.randn(64 << 20 if dev != "cpu" else 1 << 20, device=dev)
    copy_ms = bench_ms(lambda: big.clone())
    bw = 2 * big.numel() * 4 / copy_ms / 1e6  # GB/s
    del big
    print(f"copy: f32 clone {copy_ms:.3f} ms = {bw:.0f} GB/s (read + write); {torch.cuda.get_device_name() if dev != 'cpu' else 'cpu'}")
    bad = 0
    rows = []
    head = f"{'case':40} {'floor':>7} {'torch':>7}" + "".join(f" {n[:9]:>9}" for n, _, _ in bins)
    with tempfile.TemporaryDirectory() as tmp:
        p = os.path.join(tmp, "p.py")
        results = []
        for c in cases():
            if a.only and not any(s in c[0] for s in a.only):
                continue
            names, text = program(c)
            open(p, "w").write(text)
            spec = lambda shapes: {n: f"randn:{c[1]}[{','.join(map(str, s))}]" for n, s in shapes.items()}
            shapes = shapes_of(c, names, check=True)
            specs = spec(shapes)
            status = []
            thunder0, cfg0 = os.path.join(bins[0][1], "thunder"), bins[0][2]
            if not a.no_check:
                ins = sum((["-i", f"{n}={s}"] for n, s in specs.items()), [])
                rc, out = run([thunder0, "--config", cfg0, "examine", p, "--device", dev] + ins)
                ok = rc == 0 and any("match" in l for l in out.splitlines() if "outputs match" in l)
                status.append(f"examine {'ok' if ok else 'FAIL'}")
                if not ok:
                    bad += 1
                    print(out[-1500:])
                if c[1] == "f32":
                    g = torch.Generator(device=dev).manual_seed(1)
                    t = {n: torch.randn(s, device=dev, dtype=torch.float32, generator=g) for n, s in shapes.items()}
                    ins = []
                    for n, v in t.items():
                        f = os.path.join(tmp, f"{n}.npy")
                        np.save(f, v.cpu().numpy())
                        ins += ["-i", f"{n}={f}"]
                    od = os.path.join(tmp, "out")
                    os.makedirs(od, exist_ok=True)
                    for f in os.listdir(od):
                        os.remove(os.path.join(od, f))
                    rc, out = run([thunder0, "--config", cfg0, "run", p, "--device", dev, "--out", od] + ins)
                    refs = torch_fn(c)({n: v.double() for n, v in t.items()})
                    worst, ok = 0.0, rc == 0
                    if ok:
                        for i, ref in enumerate(refs):
                            got = np.load(os.path.join(od, f"out_{i}.npy")).astype(np.float64)
                            ref = ref.cpu().numpy()
                            err = float(np.max(np.abs(got - ref)) / max(np.max(np.abs(ref)), 1e-30))
                            worst = max(worst, err if np.isfinite(got).all() else float("inf"))
                        ok = worst <= 1e-5
                    else:
                        print(out[-1500:])
                    status.append(f"torch {'ok' if ok else 'FAIL'} ({worst:.1e})")
                    bad += 0 if ok else 1
            # Timing.
            shapes = shapes_of(c, names)
            specs = spec(shapes)
            g = torch.Generator(device=dev).manual_seed(0)
            t = {n: torch.randn(s, device=dev, dtype=DT[c[1]], generator=g) for n, s in shapes.items()}
            fn = torch_fn(c)
            outs = fn(t)
            floor_us = floor_bytes(c, t, outs) / (bw * 1e3)
            torch_us = bench_ms(lambda: fn(t)) * 1e3
            del t, outs
            ths = []
            for n, d, cfg in bins:
                cmd = [os.path.join(d, "thunder"), "--config", cfg, "bench", p, "--device", dev, "--json",
                       "--reps", "20"] + sum((["-i", f"{k}={s}"] for k, s in specs.items()), [])
                rc, out = run(cmd, stdout_only=True)
                try:
                    j = json.loads(out[out.index("{"):]) if rc == 0 else {}
                    us = sum(r["median_ms"] for r in j["regions"]) * 1e3
                    execs = ",".join(sorted({r["executor"] for r in j["regions"]}))
                except (ValueError, KeyError):
                    us, execs = float("nan"), "error"
                    print(f"  {n}: bench failed: {out[-600:]}")
                ths.append((us, execs))
            rows.append(dict(case=c[0], floor_us=floor_us, torch_us=torch_us,
                             thunder={n: {"us": u, "executors": e} for (n, _, _), (u, e) in zip(bins, ths)},
                             checks=status))
            if len(rows) == 1:
                print("us, and (x the floor)\n" + head)
            line = f"{c[0][:40]:40} {floor_us:7.1f} {torch_us:7.1f}" + "".join(f" {u:9.1f}" for u, _ in ths)
            line += "   (" + " ".join(f"{v / floor_us:.2f}x" for v in [torch_us] + [u for u, _ in ths]) + ")"
            line += "  " + "; ".join(status) + "  [" + " ".join(e for _, e in ths) + "]"
            print(line, flush=True)
    if a.json:
        json.dump({"copy_gbps": bw, "cases": rows}, open(a.json, "w"), indent=1)
    print(f"columns_check: {bad} failures")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
