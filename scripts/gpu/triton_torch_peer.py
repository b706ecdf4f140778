#!/usr/bin/env python3
"""PyTorch's side of scripts/gpu/triton_check.sh: times F.scaled_dot_product_attention (its
flash backend) at the shapes `thunder triton-check` uses, and prints thunder's Triton kernels
beside it as ratios: inference forward, the training forward (sdpa_fwd_lse: torch's forward
with inputs that require grad, which saves its logsumexp) and the backward alone (sdpa_bwd:
torch.autograd.grad on a kept graph). The issue's aim: fwd+bwd within 1.1x at B8 H12 T1024 D64
bf16 (scripts/gpu/attn_peer.py times that end to end from Python)."""

import argparse
import json

import torch
import torch.nn.functional as F


def time_ms(f, reps=20):
    f()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        f()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    times.sort()
    return times[len(times) // 2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--thunder", help="thunder triton-check --json output")
    ap.add_argument("--json", help="write torch's numbers here")
    args = ap.parse_args()
    q, k, v = (torch.randn(8, 12, 1024, 64, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    rows = {}
    flash = torch.nn.attention.SDPBackend.FLASH_ATTENTION
    for causal in [False, True]:
        tail = "b8h12t1024d64_bf16" + ("_causal" if causal else "")
        with torch.nn.attention.sdpa_kernel(flash):
            rows["sdpa_" + tail] = {"ms": time_ms(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal))}
        try:
            qg, kg, vg = (t.detach().clone().requires_grad_() for t in (q, k, v))
            do = torch.randn_like(q)
            with torch.nn.attention.sdpa_kernel(flash):
                rows["sdpa_fwd_lse_" + tail] = {
                    "ms": time_ms(lambda: F.scaled_dot_product_attention(qg, kg, vg, is_causal=causal))}
                out = F.scaled_dot_product_attention(qg, kg, vg, is_causal=causal)
                rows["sdpa_bwd_" + tail] = {
                    "ms": time_ms(lambda: torch.autograd.grad(out, (qg, kg, vg), do, retain_graph=True))}
        except Exception as e:  # noqa: BLE001 (the other rows still print)
            print(f"torch training attention ({tail}): {e}")
    x = torch.randn(8192, 4096, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(4096, device="cuda", dtype=torch.bfloat16)
    rows["rms_norm_8192x4096_bf16"] = {"ms": time_ms(lambda: F.rms_norm(x, [4096], w, 1e-6))}
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows}, f, indent=1)
    thunder = {}
    if args.thunder:
        try:
            with open(args.thunder) as f:
                thunder = json.load(f).get("benchmarks") or {}
        except (OSError, json.JSONDecodeError) as e:
            print(f"no thunder numbers: {e}")
    print(f"{'benchmark':40} {'thunder ms':>11} {'torch ms':>9} {'ratio':>6}")
    for name, r in rows.items():
        for label, t in [(name, thunder.get(name, {})),
                         (name + " (cuda-fuser)", thunder.get(name + "_cuda_fuser"))]:
            if t is None:
                continue
            ms = t.get("ms")
            shown = f"{ms:.3f}" if ms else t.get("error", "-")[:40]
            ratio = f"{ms / r['ms']:.2f}" if ms else "-"
            print(f"{label:40} {shown:>11} {r['ms']:9.3f} {ratio:>6}")
    for causal in ["", "_causal"]:
        tail = "b8h12t1024d64_bf16" + causal
        f, b = thunder.get("sdpa_fwd_lse_" + tail, {}), thunder.get("sdpa_bwd_" + tail, {})
        tf, tb = rows.get("sdpa_fwd_lse_" + tail), rows.get("sdpa_bwd_" + tail)
        chained = thunder.get("attn_fwd_bwd_" + tail, {}).get("ms")
        mine = chained or (f["ms"] + b["ms"] if f.get("ms") and b.get("ms") else None)
        if mine and tf and tb:
            theirs = tf["ms"] + tb["ms"]
            print(f"{'fwd+bwd ' + tail:40} {mine:11.3f} {theirs:9.3f} {mine / theirs:6.2f}  (target <= 1.1)")


if __name__ == "__main__":
    main()
