#!/usr/bin/env python3
"""PyTorch on the shapes of `thunder gpu-check`, in the same run, and the ratios.

Measures the device's copy floor (a 64M f32 clone: 256 MiB read + 256 MiB written), then
eager and torch.compile for the 8-op chain, softmax and layer_norm over rows of 4096, and the
host cost of a cached call on 64 elements. Prints one table with thunder's numbers beside.
"""
import argparse
import json
import time

import torch
import torch.nn.functional as F


def bench_ms(fn, reps=20):
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    times.sort()
    return times[len(times) // 2]


def chain(x):
    for _ in range(4):
        x = x * 1.01 + 0.1
    return x


def host_us(fn, x, calls=2000):
    fn(x)
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(calls):
        fn(x)
    us = (time.perf_counter() - t) * 1e6 / calls
    torch.cuda.synchronize()
    return us


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--thunder", help="thunder gpu-check --json output")
    ap.add_argument("--json", help="write torch numbers here")
    args = ap.parse_args()
    n = 64 << 20
    x = torch.randn(n, device="cuda")
    rows = x.view(-1, 4096)
    w = torch.randn(4096, device="cuda")
    b = torch.randn(4096, device="cuda")
    res = {}
    res["copy_floor_ms"] = bench_ms(lambda: x.clone())
    res["chain8_eager_ms"] = bench_ms(lambda: chain(x))
    cchain = torch.compile(chain)
    res["chain8_compile_ms"] = bench_ms(lambda: cchain(x))
    res["softmax_eager_ms"] = bench_ms(lambda: torch.softmax(rows, -1))
    res["layer_norm_eager_ms"] = bench_ms(lambda: F.layer_norm(rows, (4096,), w, b))
    small = torch.randn(64, device="cuda")

    def ten(x):
        for _ in range(5):
            x = x * 1.01 + 0.1
        return x

    res["cached_call_eager_us"] = host_us(ten, small)
    for name, dt, m in [("matmul_bf16_8192", torch.bfloat16, 8192), ("matmul_f32_4096", torch.float32, 4096)]:
        torch.backends.cuda.matmul.allow_tf32 = False
        a = torch.randn(m, m, device="cuda", dtype=dt)
        bb = torch.randn(m, m, device="cuda", dtype=dt)
        ms = bench_ms(lambda: a @ bb)
        res[name + "_tflop_per_s"] = 2 * m**3 / ms / 1e9
    cten = torch.compile(ten)
    res["cached_call_compile_us"] = host_us(cten, small)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=2)
    th = {}
    if args.thunder:
        try:
            with open(args.thunder) as f:
                th = json.load(f).get("benchmarks") or {}
        except (OSError, ValueError) as e:
            print(f"(no thunder numbers: {e})")
    floor = res["copy_floor_ms"]
    print(f"copy floor 64M f32: {floor:.3f} ms ({2 * 4 * n / floor / 1e6:.0f} GB/s)")
    def row(name, torch_ms, key, field="ms"):
        t = th.get(key, {}).get(field)
        ratio = f"{t / floor:.2f}x floor" if t else "-"
        tt = f"{t:.3f}" if t else "-"
        print(f"{name:28} torch {torch_ms:9.3f}  thunder {tt:>9}  {ratio}")
    row("chain8 eager", res["chain8_eager_ms"], "chain8_64m_f32")
    row("chain8 compile", res["chain8_compile_ms"], "chain8_64m_f32")
    row("softmax rows 4096", res["softmax_eager_ms"], "softmax_4096")
    row("layer_norm rows 4096", res["layer_norm_eager_ms"], "layer_norm_4096")
    cc = th.get("cached_call_64_us", {}).get("us")
    print(f"cached call (host us): eager {res['cached_call_eager_us']:.1f}  compile {res['cached_call_compile_us']:.1f}  thunder {cc if cc is not None else '-'}")
    for name in ["matmul_bf16_8192", "matmul_f32_4096"]:
        t = th.get(name, {}).get("tflop_per_s")
        p = res[name + "_tflop_per_s"]
        ratio = f"{t / p:.3f}x torch" if t else "-"
        print(f"{name:28} torch {p:9.1f} TFLOP/s  thunder {t if t else '-'}  {ratio}")
    comp = th.get("compile_new_region", {})
    print(f"new region compile: first {comp.get('first_ms', '-')} ms, cache hit {comp.get('cache_hit_ms', '-')} ms")
    diff = {}
    if args.thunder:
        try:
            with open(args.thunder) as f:
                diff = json.load(f).get("differential", {})
        except (OSError, ValueError):
            pass
    print(f"differential: {diff.get('passed', '-')}/{diff.get('samples', '-')} samples agree")


if __name__ == "__main__":
    main()
