#!/usr/bin/env python3
"""The GPT-2 block on cuda:0 with cuBLAS reading transposed and reshaped operands in place.

Two parts (gemm_layouts_check.sh runs both):
  --check: the block (B2 T128 C768 H12, f32, so attention is decomposed and its batched
    products with transposed operands run on cuBLAS too) through `thunder examine --device
    cuda:0` (forward against the interpreter) and `thunder run --grad` on cuda:0 against the
    interpreter on the CPU (every gradient within 1e-3 of the largest, as rows_check.py);
  --regions JSON: reads `thunder bench --grad --json` of the bf16 block (gpt2_block_peer.py
    --json) and prints where the time goes by executor, every cuBLAS region's ops, and the
    fuser regions that still contain a transpose.
Prints one PASS/FAIL line per check; exits 1 on any FAIL.
"""
import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpt2_block_peer as block  # noqa: E402


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    return r.returncode, r.stdout + r.stderr


def check(thunder, config, device):
    text, shapes = block.program(2, 128, 768, 12)
    ins = sum((["-i", "%s=randn:f32[%s]" % (n, ",".join(map(str, s)))] for n, s in shapes.items()), [])
    bad = 0
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "block.py")
        with open(p, "w") as f:
            f.write(text)
        # examine compares elementwise at rtol 1.3e-6, too tight for a scalar mean over
        # products summed in another order (cuBLAS vs the interpreter's f64 loops): it is
        # printed for information; the verdict below compares the loss with the gradients.
        rc, out = run([thunder, "--config", config, "examine", p, "--device", device] + ins)
        same = rc == 0 and any("outputs match" in l for l in out.splitlines())
        print(f"INFO examine of the block forward f32 on {device}: "
              f"{'outputs match' if same else 'beyond examine tolerance'}")
        if not same:
            print("\n".join(l for l in out.splitlines() if "max abs" in l or "MISMATCH" in l or "verdict" in l))
        gd, gc = os.path.join(d, "gd"), os.path.join(d, "gc")
        os.makedirs(gd)
        os.makedirs(gc)
        rc1, o1 = run([thunder, "--config", config, "run", p, "--grad", "--device", device, "--out", gd] + ins)
        rc2, o2 = run([thunder, "--config", config, "--executors", "interpreter", "run", p, "--grad",
                       "--device", "cpu", "--out", gc] + ins)
        worst, ok = 0.0, rc1 == 0 and rc2 == 0
        if ok:
            loss_ok = True
            for f in sorted(os.listdir(gc)):
                ref = np.load(os.path.join(gc, f)).astype(np.float64)
                got = np.load(os.path.join(gd, f)).astype(np.float64)
                err = float(np.max(np.abs(got - ref)) / max(np.max(np.abs(ref)), 1e-30))
                if not np.isfinite(got).all():
                    err = float("inf")
                if not f.startswith("grad_"):
                    print(f"     {f:<14} relative error of the loss {err:.2e} (limit 1e-4)")
                    loss_ok = loss_ok and err <= 1e-4
                    continue
                print(f"     {f:<14} worst error / max |grad| {err:.2e}")
                worst = max(worst, err)
            ok = worst <= 1e-3 and loss_ok
        else:
            print((o1 + o2)[-3000:])
        print(f"{'PASS' if ok else 'FAIL'} block loss and gradients f32 on {device} vs interpreter "
              f"(loss within 1e-4; worst gradient {worst:.2e}, limit 1e-3)")
        bad += 0 if ok else 1
    return bad


def regions(path):
    with open(path) as f:
        bench = json.load(f)
    by_exec = collections.defaultdict(float)
    for r in bench["regions"]:
        by_exec[(r["pass"], r["executor"])] += r["median_ms"]
    print(f"block steady median {bench['steady']['median_ms']:.3f} ms; time by pass and executor:")
    for (p, e), ms in sorted(by_exec.items()):
        print(f"  {p:<8} {e:<12} {ms:8.3f} ms")
    print("cuBLAS regions (ops folded into each product):")
    for r in bench["regions"]:
        if r["executor"] == "cublas":
            print(f"  {r['pass']:<8} {r['median_ms']:7.3f} ms  {', '.join(r['ops'])}")
    left = [r for r in bench["regions"] if r["executor"] != "cublas" and "prims.transpose" in r["ops"]]
    print(f"other regions with a prims.transpose: {len(left)}")
    for r in sorted(left, key=lambda r: -r["median_ms"]):
        ops = ", ".join(dict.fromkeys(r["ops"]))
        print(f"  {r['pass']:<8} {r['executor']:<12} {r['median_ms']:7.3f} ms  {ops[:120]}")
    # A transpose feeding a product is the pattern this change folds: a cuBLAS region that
    # still reads one would show it as a region input, which the bench JSON does not list, so
    # the count above is what to compare with the previous run.
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", required=True)
    ap.add_argument("--config", required=True)
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--device", default="cuda:0", help="cpu only to try the script without a GPU")
    ap.add_argument("--regions", default=None, help="bench JSON of the bf16 block")
    a = ap.parse_args()
    bad = 0
    if a.check:
        bad += check(os.path.join(a.bin, "thunder"), a.config, a.device)
    if a.regions:
        bad += regions(a.regions)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
