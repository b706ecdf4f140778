#!/usr/bin/env python3
"""A GPT-2 block forward and backward on the GPU: thunder beside PyTorch eager and torch.compile.

Writes the block as a program in the natural spelling (pre-LN, qkv linear + split, head
permutes, causal SDPA, tanh-GELU MLP, residuals; loss = mean(y * r)), times it with
`thunder bench PROGRAM --device cuda:0 --grad --json` (every floating-point input is
differentiated, as PyTorch does below with requires_grad on every input), then times PyTorch
on the same shapes and dtype in the same run. Prints one table (steady state, first call) and
thunder's ten most expensive regions, so the note can say where the time goes.

    python3 scripts/gpu/gpt2_block_peer.py --bin .gpu-bin --config gpu-out/plugins-e2e.toml
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import torch
import torch.nn.functional as F


def program(B, T, C, H):
    D = C // H
    lines = [
        "def block(x, ln1_w, ln1_b, w_qkv, b_qkv, w_o, b_o, ln2_w, ln2_b, w_fc, b_fc, w_pr, b_pr, r):",
        f"    h = ltorch.layer_norm(x, [{C}], weight=ln1_w, bias=ln1_b)",
        "    qkv = ltorch.linear(h, w_qkv, b_qkv)",
        f"    q, k, v = ltorch.split(qkv, [{C}, {C}, {C}], dim=2)",
    ]
    for n in "qkv":
        lines += [f"    {n}4 = ltorch.reshape({n}, [{B}, {T}, {H}, {D}])",
                  f"    {n}h = ltorch.permute({n}4, [0, 2, 1, 3])"]
    lines += [
        "    att = ltorch.scaled_dot_product_attention(qh, kh, vh, is_causal=True)",
        "    at = ltorch.permute(att, [0, 2, 1, 3])",
        f"    a2 = ltorch.reshape(at, [{B}, {T}, {C}])",
        "    o = ltorch.linear(a2, w_o, b_o)",
        "    x1 = ltorch.add(x, o)",
        f"    h2 = ltorch.layer_norm(x1, [{C}], weight=ln2_w, bias=ln2_b)",
        "    fc = ltorch.linear(h2, w_fc, b_fc)",
        "    gl = ltorch.gelu(fc, approximate='tanh')",
        "    pr = ltorch.linear(gl, w_pr, b_pr)",
        "    y = ltorch.add(x1, pr)",
        "    yr = ltorch.mul(y, r)",
        "    loss = ltorch.mean(yr)",
        "    return loss",
    ]
    shapes = {"x": [B, T, C], "ln1_w": [C], "ln1_b": [C], "w_qkv": [3 * C, C], "b_qkv": [3 * C],
              "w_o": [C, C], "b_o": [C], "ln2_w": [C], "ln2_b": [C], "w_fc": [4 * C, C],
              "b_fc": [4 * C], "w_pr": [C, 4 * C], "b_pr": [C], "r": [B, T, C]}
    return "\n".join(lines) + "\n", shapes


def torch_block(t, B, T, C, H):
    D = C // H
    h = F.layer_norm(t["x"], [C], t["ln1_w"], t["ln1_b"])
    q, k, v = F.linear(h, t["w_qkv"], t["b_qkv"]).split([C, C, C], 2)
    heads = lambda z: z.reshape(B, T, H, D).permute(0, 2, 1, 3)
    att = F.scaled_dot_product_attention(heads(q), heads(k), heads(v), is_causal=True)
    x1 = t["x"] + F.linear(att.permute(0, 2, 1, 3).reshape(B, T, C), t["w_o"], t["b_o"])
    h2 = F.layer_norm(x1, [C], t["ln2_w"], t["ln2_b"])
    y = x1 + F.linear(F.gelu(F.linear(h2, t["w_fc"], t["b_fc"]), approximate="tanh"),
                      t["w_pr"], t["b_pr"])
    return (y * t["r"]).mean()


def cuda_ms(fn, reps):
    for _ in range(3):
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
    return times[len(times) // 2], times[0]


def torch_rows(shapes, dtype, dims, reps):
    gen = torch.Generator(device="cuda").manual_seed(0)
    t = {n: (torch.randn(s, device="cuda", generator=gen) * (0.02 if n.startswith("w") else 1.0))
         .to(dtype).requires_grad_(True) for n, s in shapes.items()}
    params = list(t.values())

    def step(f):
        def run():
            for p in params:
                p.grad = None
            f(t, *dims).backward()
        return run

    rows = {}
    torch.cuda.reset_peak_memory_stats()
    rows["eager"] = cuda_ms(step(torch_block), reps) + (torch.cuda.max_memory_allocated(),)
    compiled = torch.compile(torch_block)
    t0 = time.perf_counter()
    step(compiled)()
    torch.cuda.synchronize()
    first = time.perf_counter() - t0
    torch.cuda.reset_peak_memory_stats()
    rows["torch.compile"] = cuda_ms(step(compiled), reps) + (torch.cuda.max_memory_allocated(),)
    return rows, first


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", default="target/release")
    ap.add_argument("--config", default=None)
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "f16", "f32"])
    ap.add_argument("--shape", default="8,1024,768,12", help="B,T,C,H")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--json", default=None, help="write thunder's bench JSON here")
    ap.add_argument("--write-program", default=None,
                    help="write the block's program here, print its `-i` arguments, and stop (for ncu)")
    a = ap.parse_args()
    B, T, C, H = map(int, a.shape.split(","))
    text, shapes = program(B, T, C, H)
    if a.write_program:
        with open(a.write_program, "w") as f:
            f.write(text)
        print(" ".join("-i %s=randn:%s[%s]" % (n, a.dtype, ",".join(map(str, s))) for n, s in shapes.items()))
        return
    with tempfile.TemporaryDirectory() as d:
        prog = os.path.join(d, "gpt2_block.py")
        with open(prog, "w") as f:
            f.write(text)
        cmd = [os.path.join(a.bin, "thunder")] + (["--config", a.config] if a.config else [])
        cmd += ["bench", prog, "--device", "cuda:0", "--grad", "--json", "--reps", str(a.reps)]
        for n, s in shapes.items():
            cmd += ["-i", "%s=randn:%s[%s]" % (n, a.dtype, ",".join(map(str, s)))]
        proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        print("thunder bench failed:\n" + proc.stderr[-4000:])
        thunder = None
    else:
        thunder = json.loads(proc.stdout)
        if a.json:
            with open(a.json, "w") as f:
                json.dump(thunder, f, indent=1)
    dtype = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}[a.dtype]
    rows, compile_first = torch_rows(shapes, dtype, (B, T, C, H), a.reps)
    print(f"GPT-2 block fwd+bwd {a.dtype} B{B} T{T} C{C} H{H} on {torch.cuda.get_device_name()}, "
          f"torch {torch.__version__}")
    print(f"  {'who':<16} {'median ms':>10} {'min ms':>9} {'peak MiB':>9} {'first call':>11}")
    for who, (med, best, peak) in rows.items():
        first = f"{compile_first:.2f} s" if who == "torch.compile" else ""
        print(f"  {who:<16} {med:>10.3f} {best:>9.3f} {peak / 2**20:>9.0f} {first:>11}")
    if thunder:
        s = thunder["steady"]
        print(f"  {'thunder':<16} {s['median_ms']:>10.3f} {s['min_ms']:>9.3f} {'':>9} "
              f"{thunder['first_call']['total_ms'] / 1e3:>9.2f} s")
        eager = rows["eager"][0]
        print(f"  thunder / eager {s['median_ms'] / eager:.2f}x, / torch.compile "
              f"{s['median_ms'] / rows['torch.compile'][0]:.2f}x")
        print("  thunder's most expensive regions:")
        for r in sorted(thunder["regions"], key=lambda r: -r["median_ms"])[:10]:
            ops = ", ".join(dict.fromkeys(r["ops"]))
            print(f"    {r['pass']:<8} {r['executor']:<12} {r['median_ms']:8.3f} ms "
                  f"{100 * r['share']:5.1f}%  {ops[:110]}")
    return 0 if thunder else 1


if __name__ == "__main__":
    sys.exit(main())
