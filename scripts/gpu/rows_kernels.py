#!/usr/bin/env python3
"""Row kernels (issue 17) on cuda:0 by kernel time: thunder_rs.jit beside PyTorch eager.

`rows_peer.py` reads `thunder bench`'s region times, which are host clocks around a call and its
wait, so a 10 µs kernel reads as 20 µs there (and PyTorch's per-call event times carry the same
launch cost). This script sums the durations of the kernels themselves, as CUPTI records them
(torch.profiler's trace), per call, so both sides are judged by what the GPU spent:

- before each call a 256 MiB device-to-device copy evicts L2 (50 MB on an H100), so every case
  reads from DRAM, like the floor; copies are not kernels and are not counted;
- forward: `f(x)` on inputs that need no grad; backward: (`f(x)` then its grad) minus the same
  forward on inputs that need grad (the training forward may save more than the inference one);
- "copy of x": the same bytes copied (x into a buffer like it), timed the same way: a small
  case cannot reach the large copy's bandwidth (launch and tail), nor can its own copy;
- the floor is the case's bytes (inputs read once, outputs written once) over the bandwidth of
  that copy (its bytes read and written over its duration); the backward floor counts x and dy
  read and dx written (cross-entropy's: the logits read and their gradient written);
- "same-bytes copy": a copy moving as many bytes as the floor counts (x's copy scaled for the
  forward, a copy of 1.5 x's elements for a backward reading two arrays and writing one), the
  floor that a case too small for the large copy's bandwidth can reach.

    PYTHONPATH=<thunder_rs wheel> THUNDER_CONFIG=plugins.toml python3 scripts/gpu/rows_kernels.py \
        [--only layer_norm softmax] [--json out.json] [--kernels]
"""
import argparse
import json
import os
import sys
import tempfile

import torch
import torch._dynamo  # noqa: F401  (the profiler's lazy import of torch._inductor is circular without it)
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile

import thunder_rs

DT = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}
FLUSH = 256 << 20


def cases(sel):
    out = []

    def add(name, dt, shape, fn, floor_elems, needs_target=False, bwd_elems=3):
        if sel and not any(s in name for s in sel):
            return
        out.append(dict(name=name, dt=dt, shape=shape, fn=fn, floor_elems=floor_elems, target=needs_target,
                        bwd_elems=bwd_elems))

    for dt, (R, C) in [("bf16", (8192, 768)), ("bf16", (8192, 4096)), ("f32", (16384, 4096))]:
        add(f"layer_norm {dt} {R}x{C}", dt, [R, C], lambda x, w, b, t: F.layer_norm(x, x.shape[-1:], w, b), 2)
        add(f"rms_norm {dt} {R}x{C}", dt, [R, C], lambda x, w, b, t: F.rms_norm(x, x.shape[-1:], w), 2)
        add(f"softmax {dt} {R}x{C}", dt, [R, C], lambda x, w, b, t: torch.softmax(x, -1), 2)
    for dt, (R, C) in [("bf16", (4096, 50257)), ("f32", (2048, 50257))]:
        add(f"softmax {dt} {R}x{C}", dt, [R, C], lambda x, w, b, t: torch.softmax(x, -1), 2)
        add(f"log_softmax {dt} {R}x{C}", dt, [R, C], lambda x, w, b, t: torch.log_softmax(x, -1), 2)
        # The loss's cotangent is a scalar: its backward reads the logits and writes their gradient.
        add(f"cross_entropy {dt} {R}x{C}", dt, [R, C], lambda x, w, b, t: F.cross_entropy(x, t), 1, True, 2)
    # f32 rows whose softmax gradient needs a cluster of 4 or 8 blocks a row on an H100 (both
    # operands staged), and a few odd rows of a peeled length on 4.
    for R, C in [(1024, 65536), (512, 131072), (3, 100003)]:
        add(f"softmax f32 {R}x{C}", "f32", [R, C], lambda x, w, b, t: torch.softmax(x, -1), 2)
    return out


class Kernels:
    """Runs `fn` `reps` times under the profiler, a cache-evicting copy before each call, and
    returns the kernels' total duration per call (µs) with the per-kernel means."""

    def __init__(self, profiled=True):
        self.profiled = profiled
        self.src = torch.empty(FLUSH, dtype=torch.uint8, device="cuda")
        self.dst = torch.empty_like(self.src)

    def per_call(self, fn, reps):
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        if not self.profiled:  # under ncu, which profiles by itself
            for _ in range(reps):
                fn()
            torch.cuda.synchronize()
            return float("nan"), {}, [float("nan")] * 2 * reps
        with profile(activities=[ProfilerActivity.CUDA]) as p:
            for _ in range(reps):
                self.dst.copy_(self.src)
                fn()
            torch.cuda.synchronize()
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "trace.json")
            p.export_chrome_trace(path)
            events = json.load(open(path))["traceEvents"]
        kernels, copies = {}, []
        for e in events:
            if e.get("ph") != "X":
                continue
            if e.get("cat") == "kernel":
                k = kernels.setdefault(e["name"], [0.0, 0])
                k[0] += e["dur"]
                k[1] += 1
            elif e.get("cat") == "gpu_memcpy":
                copies.append((e["ts"], e["dur"]))
        total = sum(v[0] for v in kernels.values()) / reps
        named = {n: (v[0] / v[1], v[1] / reps) for n, v in kernels.items()}
        return total, named, [d for _, d in sorted(copies)]


def agreement(fn, jfn, args, cot, dt):
    """thunder's output and input gradient against PyTorch's: the largest difference over the
    largest magnitude, and whether it is within a few units of the dtype's rounding."""
    x = args[0]
    tol = 1e-5 if dt == "f32" else 2.0**-6
    out = []
    try:
        for f in (fn, jfn):
            xr = x.clone().requires_grad_(True)
            y = f(xr, *args[1:])
            (gx,) = torch.autograd.grad(y, xr, cot)
            out.append((y.detach().float(), gx.float()))
    except Exception as e:  # reported, not fatal: the timings still print
        return f"check failed: {type(e).__name__}: {e}"[:200]
    words = []
    for what, (a, b) in zip(("out", "grad"), zip(out[0], out[1])):
        rel = ((a - b).abs().max() / a.abs().max().clamp_min(1e-30)).item()
        words.append(f"{what} {rel:.1e} {'ok' if rel <= tol else 'BAD'}")
    return ", ".join(words)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", nargs="*", default=[])
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--json")
    ap.add_argument("--kernels", action="store_true", help="print each kernel's mean duration")
    ap.add_argument("--no-profiler", action="store_true", help="only run the calls (under ncu)")
    a = ap.parse_args()
    k = Kernels(profiled=not a.no_profiler)
    _, _, copies = k.per_call(lambda: None, a.reps)
    copies.sort()
    copy_us = copies[len(copies) // 2]
    bw = 2 * FLUSH / copy_us / 1e3  # GB/s: bytes read and written
    print(f"copy: 256 MiB device-to-device {copy_us:.1f} us = {bw:.0f} GB/s (read + write); "
          f"{torch.cuda.get_device_name()}; torch {torch.__version__}")
    print(f"{'case':30} {'floor':>6} {'torch':>7} {'thunder':>7} | {'bfloor':>6} {'torch':>7} {'thunder':>7}"
          " | copy of x   (x floor: torch thunder | torch thunder)")
    res = {"copy_gbps": bw, "device": torch.cuda.get_device_name(), "cases": []}
    for c in cases(a.only):
        dt = DT[c["dt"]]
        g = torch.Generator(device="cuda").manual_seed(0)
        x = torch.randn(c["shape"], device="cuda", dtype=dt, generator=g)
        C = c["shape"][-1]
        w = torch.randn(C, device="cuda", dtype=dt, generator=g)
        b = torch.randn(C, device="cuda", dtype=dt, generator=g)
        t = torch.randint(0, C, (c["shape"][0],), device="cuda", generator=g)
        floor = x.numel() * x.element_size() * c["floor_elems"] / (bw * 1e3)
        bfloor = c["bwd_elems"] * x.numel() * x.element_size() / (bw * 1e3)
        # The same bytes copied (x to a buffer of its size), timed like the cases: a small
        # case cannot reach the 256 MiB copy's bandwidth (launch and tail), nor can its copy.
        xc = torch.empty_like(x)
        _, _, cs = k.per_call(lambda: xc.copy_(x), a.reps)
        cs = sorted(cs[1::2])  # in time order: flush, copy of x, flush, ...
        same_copy = cs[len(cs) // 2] if cs else float("nan")
        # And the backward's bytes: a copy that reads and writes as many bytes in all as the
        # backward floor counts (bwd_elems / 2 arrays like x, read and written).
        xb = torch.empty(int(x.numel() * c["bwd_elems"] / 2), device="cuda", dtype=dt)
        xbc = torch.empty_like(xb)
        _, _, cs = k.per_call(lambda: xbc.copy_(xb), a.reps)
        cs = sorted(cs[1::2])
        bwd_copy = cs[len(cs) // 2] if cs else float("nan")
        del xb, xbc
        fn = c["fn"]
        jfn = thunder_rs.jit(lambda x, w, b, t: fn(x, w, b, t))
        row = {"case": c["name"], "floor_us": floor, "bwd_floor_us": bfloor, "copy_of_x_us": same_copy,
               "copy_of_bwd_bytes_us": bwd_copy}
        xr = x.clone().requires_grad_(True)
        cot = torch.randn_like(fn(x, w, b, t))
        for who, f in (("torch", fn), ("thunder", jfn)):
            try:
                fwd, fk, _ = k.per_call(lambda: f(x, w, b, t), a.reps)
                ftr, _, _ = k.per_call(lambda: f(xr, w, b, t), a.reps)

                def step():
                    y = f(xr, w, b, t)
                    torch.autograd.grad(y, xr, cot)

                both, bk, _ = k.per_call(step, a.reps)
                row[who] = {"fwd_us": fwd, "train_fwd_us": ftr, "bwd_us": both - ftr,
                            "fwd_kernels": fk, "fwd_bwd_kernels": bk}
            except Exception as e:  # a failing side is reported, the other still timed
                row[who] = {"error": f"{type(e).__name__}: {e}"[:400]}
                print(f"  {who} {c['name']}: {row[who]['error']}")
        row["check"] = agreement(fn, jfn, (x, w, b, t), cot, c["dt"])
        res["cases"].append(row)
        tf = row["torch"].get("fwd_us", float("nan"))
        hf = row["thunder"].get("fwd_us", float("nan"))
        tb = row["torch"].get("bwd_us", float("nan"))
        hb = row["thunder"].get("bwd_us", float("nan"))
        print(f"{c['name'][:30]:30} {floor:6.1f} {tf:7.1f} {hf:7.1f} | {bfloor:6.1f} {tb:7.1f} {hb:7.1f}"
              f" | {same_copy:7.1f}   ({tf / floor:.2f}x {hf / floor:.2f}x | {tb / bfloor:.2f}x {hb / bfloor:.2f}x)"
              f"  {row['check']}", flush=True)
        # Against a copy of the same bytes (the floor where a case is too small for the large
        # copy's bandwidth): the forward's bytes are x's copy's unless it reads or writes more.
        fcopy = same_copy * c["floor_elems"] / 2
        print(f"{'':30} same-bytes copy {fcopy:6.1f} | {bwd_copy:6.1f}: thunder {hf / fcopy:.2f}x | {hb / bwd_copy:.2f}x,"
              f" torch {tf / fcopy:.2f}x | {tb / bwd_copy:.2f}x", flush=True)
        if a.kernels:
            for who in ("torch", "thunder"):
                for what in ("fwd_kernels", "fwd_bwd_kernels"):
                    for n, (us, per) in row[who].get(what, {}).items():
                        print(f"    {who:7} {what[:-8]:7} {us:8.1f} us x{per:.0f}  {n[:90]}")
    if a.json:
        json.dump(res, open(a.json, "w"), indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
