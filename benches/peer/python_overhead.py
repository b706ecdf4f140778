#!/usr/bin/env python3
"""Cached call overhead of thunder_rs from Python (issue 21's target: <= 10 µs), against plain
PyTorch eager and torch.compile on the same function, and a nanoGPT-style block train step.

The function is the Rust bench's `cached_call` program: `x = x * 1.01 + 0.1` five times
(10 elementwise ops) on 64 f32 elements. Needs the thunder_rs wheel installed
(scripts/python_ci.sh builds it). Usage:

    python benches/peer/python_overhead.py [--reps N] [--no-compile] [--json FILE]
"""

import argparse
import json
import os
import platform
import sys
import time

import torch

import thunder_rs


def chain(x):
    for _ in range(5):
        x = x * 1.01 + 0.1
    return x


def best_per_call(fn, arg, reps, rounds=7):
    """Best round's mean per call, in µs (the least disturbed by other load)."""
    for _ in range(max(100, reps // 10)):
        fn(arg)
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter_ns()
        for _ in range(reps):
            fn(arg)
        best = min(best, (time.perf_counter_ns() - t0) / reps / 1e3)
    return best


def split_costs(x, reps):
    """Where thunder_rs's time goes: key + DLPack in/out vs the Rust program run."""
    from thunder_rs._jit import _from_dlpack, _to_dlpack

    jf = thunder_rs.jit(chain)
    jf(x)
    prog = jf._last.program
    t = {}
    t["to_dlpack+from_dlpack (1 in, 1 out)"] = best_per_call(lambda a: _from_dlpack(_to_dlpack(a)), x, reps)
    t["Program.forward (Rust: DLPack wrap + cached program run)"] = best_per_call(
        lambda a: prog.forward([_to_dlpack(a)]), x, reps)
    return t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=20000)
    ap.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    ap.add_argument("--json", help="write the numbers here")
    a = ap.parse_args()
    torch.set_num_threads(1)
    x = torch.randn(64)
    jf = thunder_rs.jit(chain)
    assert torch.allclose(jf(x), chain(x), rtol=1e-5, atol=1e-6)
    rows = {"thunder_rs.jit cached call": best_per_call(jf, x, a.reps),
            "torch eager": best_per_call(chain, x, a.reps)}
    if not a.no_compile:
        try:
            cf = torch.compile(chain)
            cf(x)
            rows["torch.compile cached call"] = best_per_call(cf, x, a.reps)
        except Exception as e:  # no C compiler, etc.
            print(f"torch.compile unavailable: {type(e).__name__}: {e}".splitlines()[0], file=sys.stderr)
    rows.update(split_costs(x, a.reps))
    print(f"# {platform.processor() or platform.machine()}, torch {torch.__version__}, python {platform.python_version()}, "
          f"executors {os.environ.get('THUNDER_EXECUTORS', 'default')}")
    print("# 10 elementwise ops on 64 f32, best of 7 rounds of", a.reps, "calls")
    for k, v in rows.items():
        print(f"{k:60s} {v:8.2f} µs")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=2)


if __name__ == "__main__":
    main()
