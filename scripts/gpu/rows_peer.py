#!/usr/bin/env python3
"""Row kernels (issue 17) on cuda:0: thunder's regions beside PyTorch eager, as ratios of the copy floor.

Superseded for the floor target by `rows_kernels.py`, which sums the kernels' own CUPTI
durations: the region times here are host clocks around a call and its wait (launch included),
which double a 10 µs kernel. Kept for region-level A/B between builds (`--bin` columns).

For each case a one-op program is timed with `thunder bench PROG --device cuda:0 --json`
(forward) and `--grad` (value and grad of sum(op(x) * r)), and PyTorch eager runs the same op
on the same shapes in the same run. The floor of a row op is its bytes (inputs read once,
outputs written once) over the copy bandwidth measured here (a 256 MiB clone). Prints one table.

    python3 scripts/gpu/rows_peer.py --bin before=DIR:CONFIG --bin after=DIR:CONFIG [--json out.json]

Several --bin columns (thunder builds) are timed on the same inputs in the same run. The
backward floor counts x and dy read and dx written (3 passes over x).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import torch
import torch.nn.functional as F

DT = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}


def bench_ms(fn, reps=30):
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


# name, dtype, [rows, cols], thunder call (x, w, b, tgt are inputs), torch fn, extra inputs, bytes factor
def cases(sel):
    out = []
    def add(name, dt, shape, call, fn, extra, floor_elems):
        if sel and not any(s in name for s in sel):
            return
        out.append(dict(name=name, dt=dt, shape=shape, call=call, fn=fn, extra=extra, floor_elems=floor_elems))
    for dt, (R, C) in [("bf16", (8192, 768)), ("bf16", (8192, 4096)), ("f32", (16384, 4096))]:
        add(f"layer_norm {dt} {R}x{C}", dt, [R, C], f"ltorch.layer_norm(x, [{C}], weight=w, bias=b)",
            lambda x, w, b, t: F.layer_norm(x, x.shape[-1:], w, b), ["w", "b"], 2)
        add(f"rms_norm {dt} {R}x{C}", dt, [R, C], f"ltorch.rms_norm(x, [{C}], weight=w)",
            lambda x, w, b, t: F.rms_norm(x, x.shape[-1:], w), ["w"], 2)
        add(f"softmax {dt} {R}x{C}", dt, [R, C], "ltorch.softmax(x, -1)",
            lambda x, w, b, t: torch.softmax(x, -1), [], 2)
    for dt, (R, C) in [("bf16", (4096, 50257)), ("f32", (2048, 50257))]:
        add(f"softmax {dt} {R}x{C}", dt, [R, C], "ltorch.softmax(x, -1)",
            lambda x, w, b, t: torch.softmax(x, -1), [], 2)
        add(f"log_softmax {dt} {R}x{C}", dt, [R, C], "ltorch.log_softmax(x, -1)",
            lambda x, w, b, t: torch.log_softmax(x, -1), [], 2)
        add(f"cross_entropy {dt} {R}x{C}", dt, [R, C], "ltorch.cross_entropy(x, t)",
            lambda x, w, b, t: F.cross_entropy(x, t), ["t"], 1)
    add("mean bf16 8x1024x768", "bf16", [8, 1024, 768], "ltorch.mean(x)",
        lambda x, w, b, t: x.mean(), [], 1)
    add("mean f32 64Mi", "f32", [64 << 20], "ltorch.mean(x)", lambda x, w, b, t: x.mean(), [], 1)
    add("transpose bf16 8192x3072", "bf16", [8192, 3072], "ltorch.add(ltorch.transpose(x, 0, 1), 1.0)",
        lambda x, w, b, t: x.t() + 1.0, [], 2)
    return out


def thunder(bin_dir, config, case, grad):
    R, C = case["shape"][0], case["shape"][-1]
    params = ["x"] + case["extra"] + (["r"] if grad else [])
    body = f"    y = {case['call']}\n"
    if grad:
        if case["name"].startswith(("cross_entropy", "mean")):
            body += "    return y\n"
        else:
            body += "    return ltorch.sum(ltorch.mul(y, r))\n"
    else:
        body += "    return y\n"
    text = f"def f({', '.join(params)}):\n" + body
    specs = {"x": f"randn:{case['dt']}[{','.join(map(str, case['shape']))}]",
             "w": f"randn:{case['dt']}[{C}]", "b": f"randn:{case['dt']}[{C}]",
             "t": f"zeros:i64[{R}]"}
    if grad and "r" in params:
        # r weighs y, whose shape is x's except for the transpose case (reversed).
        y_shape = case["shape"][::-1] if case["name"].startswith("transpose") else case["shape"]
        specs["r"] = f"randn:{case['dt']}[{','.join(map(str, y_shape))}]"
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "prog.py")
        open(p, "w").write(text)
        cmd = [os.path.join(bin_dir, "thunder"), "--config", config, "bench", p, "--device", "cuda:0",
               "--json", "--reps", "20"] + (["--grad"] if grad else [])
        for n in params:
            cmd += ["-i", f"{n}={specs[n]}"]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        return {"error": r.stderr[-600:]}
    return json.loads(r.stdout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", action="append", required=True, help="NAME=DIR:CONFIG")
    ap.add_argument("--grad-only", nargs="*", default=None, help="cases (substrings) timed with --grad; all if absent")
    ap.add_argument("--json")
    ap.add_argument("--only", nargs="*", default=[])
    ap.add_argument("--regions", action="store_true", help="print every region's time")
    a = ap.parse_args()
    big = torch.randn(64 << 20, device="cuda")
    floor_ms = bench_ms(lambda: big.clone())
    bw = 2 * big.numel() * 4 / floor_ms / 1e6  # GB/s
    print(f"copy: 64Mi f32 clone {floor_ms:.3f} ms = {bw:.0f} GB/s (read + write); {torch.cuda.get_device_name()}")
    res = {"copy_gbps": bw, "cases": []}
    bins = [(b.split("=", 1)[0],) + tuple(b.split("=", 1)[1].split(":", 1)) for b in a.bin]
    head = f"{'case':32} {'floor':>6} {'torch':>6}" + "".join(f" {n[:9]:>9}" for n, _, _ in bins)
    head += f" | {'bfloor':>6} {'torch':>6}" + "".join(f" {n[:9]:>9}" for n, _, _ in bins)
    print("forward / backward, us and (x floor)\n" + head)
    for c in cases(a.only):
        dt = DT[c["dt"]]
        g = torch.Generator(device="cuda").manual_seed(0)
        x = torch.randn(c["shape"], device="cuda", dtype=dt, generator=g)
        C = c["shape"][-1]
        w = torch.randn(C, device="cuda", dtype=dt, generator=g)
        b = torch.randn(C, device="cuda", dtype=dt, generator=g)
        t = torch.randint(0, C, (c["shape"][0],), device="cuda", generator=g)
        nbytes = x.numel() * x.element_size() * c["floor_elems"]
        floor_us = nbytes / (bw * 1e3)
        bfloor_us = 3 * x.numel() * x.element_size() / (bw * 1e3)
        tf = bench_ms(lambda: c["fn"](x, w, b, t)) * 1e3
        xr = x.clone().requires_grad_(True)
        y = c["fn"](xr, w, b, t)
        cot = torch.randn_like(y)
        tb = bench_ms(lambda: torch.autograd.grad(y, xr, cot, retain_graph=True)) * 1e3
        row = {"case": c["name"], "floor_us": floor_us, "bwd_floor_us": bfloor_us,
               "torch_fwd_us": tf, "torch_bwd_us": tb, "thunder": {}}
        grad = a.grad_only is None or any(s in c["name"] for s in a.grad_only)
        fwds, bwds = [], []
        for n, d, cfg in bins:
            th = thunder(d, cfg, c, False)
            fwd = sum(r["median_ms"] for r in th.get("regions", [])) * 1e3 if "regions" in th else float("nan")
            thg = thunder(d, cfg, c, True) if grad else {}
            bwd = (sum(r["median_ms"] for r in thg["regions"] if r["pass"] == "backward") * 1e3
                   if "regions" in thg else float("nan"))
            row["thunder"][n] = {"fwd": th, "grad": thg, "fwd_us": fwd, "bwd_us": bwd}
            fwds.append(fwd)
            bwds.append(bwd)
            for what, j in (("fwd", th), ("grad", thg)):
                if "error" in j:
                    print(f"  {n} {what} error: {j['error'][-300:]}")
        res["cases"].append(row)
        line = f"{c['name'][:32]:32} {floor_us:6.1f} {tf:6.1f}" + "".join(f" {v:9.1f}" for v in fwds)
        line += f" | {bfloor_us:6.1f} {tb:6.1f}" + "".join(f" {v:9.1f}" for v in bwds)
        line += "   (" + " ".join(f"{v / floor_us:.2f}x" for v in [tf] + fwds) + " | "
        line += " ".join(f"{v / bfloor_us:.2f}x" for v in [tb] + bwds) + ")"
        print(line, flush=True)
    if a.json:
        json.dump(res, open(a.json, "w"), indent=1)
    if a.regions:
        for row in res["cases"]:
            for n, th in row["thunder"].items():
                for k in ("fwd", "grad"):
                    for r in (th.get(k) or {}).get("regions", []):
                        print(f"  {n[:6]:6} {row['case'][:28]:28} {k:4} {r['pass'][:3]} {r['executor'][:10]:10} {r['median_ms']*1e3:9.1f} us  {' '.join(o.replace('prims.', '') for o in dict.fromkeys(r['ops']))[:70]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
