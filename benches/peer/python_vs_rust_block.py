#!/usr/bin/env python3
"""A nanoGPT block train step (forward, loss, backward) from Python through thunder_rs against the
same two programs run from Rust (`thunder bench` on the forward and backward traces the Python
call compiled, inputs generated from their annotations). Issue 21's target: Python within 10%.

    python benches/peer/python_vs_rust_block.py [--thunder target/release/thunder] [--rounds 2]

Needs the thunder_rs wheel installed and a release `thunder` binary built from the same tree.
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python", "tests"))
import thunder_rs  # noqa: E402
from test_models import Block  # noqa: E402


class Loss(torch.nn.Module):
    def __init__(self, blk):
        super().__init__()
        self.blk = blk

    def forward(self, x):
        y = self.blk(x)
        return (y * y).mean()


def python_step_ms(jm, m, x, reps=30):
    for _ in range(3):
        jm(x).backward()
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        jm(x).backward()
        times.append((time.perf_counter() - t) * 1e3)
        m.zero_grad(set_to_none=True)
    return statistics.median(times)


def generated_inputs(trace):
    args = []
    for name, dt, shape in re.findall(r'^  # (\w+): "cpu (\w+)(\[[^\]]*\])', trace, re.M):
        kind = "randn" if dt.startswith("f") else "zeros"
        args += ["-i", f"{name}={kind}:{dt}{shape.replace(' ', '')}"]
    return args


def rust_ms(thunder, path, trace):
    out = subprocess.run([thunder, "bench", path, *generated_inputs(trace), "--min-time", "2"],
                         capture_output=True, text=True, check=True).stdout
    return float(re.search(r"steady state\s+([\d.]+) ms median", out).group(1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--thunder", default=os.path.join("target", "release", "thunder"))
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--shape", default="2,128,256,4", help="B,T,C,H")
    a = ap.parse_args()
    b, t, c, h = map(int, a.shape.split(","))
    torch.manual_seed(0)
    m = Loss(Block(n_embd=c, n_head=h, block_size=t))
    x = torch.randn(b, t, c)
    jm = thunder_rs.jit(m)
    jm(x).backward()
    traces = thunder_rs.last_traces(jm)
    fwd = next(s for s in traces if s.startswith("# Constructed by Grad transform (forward)"))
    bwd = next(s for s in traces if s.startswith("# Constructed by Grad transform (backward)"))
    with tempfile.TemporaryDirectory() as d:
        paths = []
        for name, text in (("forward.py", fwd), ("backward.py", bwd)):
            paths.append(os.path.join(d, name))
            with open(paths[-1], "w") as f:
                f.write(text)
        print(f"# block B{b} T{t} C{c} H{h}, torch {torch.__version__}, {torch.get_num_threads()} threads")
        for r in range(a.rounds):
            py = python_step_ms(jm, m, x)
            f_ms, b_ms = rust_ms(a.thunder, paths[0], fwd), rust_ms(a.thunder, paths[1], bwd)
            print(f"round {r}: python step {py:.3f} ms, rust forward {f_ms:.3f} + backward {b_ms:.3f} = "
                  f"{f_ms + b_ms:.3f} ms, python / rust {py / (f_ms + b_ms):.3f}")


if __name__ == "__main__":
    main()
