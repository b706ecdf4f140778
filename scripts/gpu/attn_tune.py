#!/usr/bin/env python3
"""Block sizes, warps and pipeline stages of the flash-attention packages' Triton kernels
(scripts/triton/kernels/attention_bwd.py), timed on the GPU through Triton's JIT at issue 17's
shape (B8 H12 T1024 D64 bf16, causal and not), beside PyTorch's flash and cuDNN backends.

    python3 scripts/gpu/attn_tune.py [--budget 420] [--json out.json]

Each config's outputs are checked against PyTorch's SDPA (forward) and autograd (backward); a
config that fails the check or does not compile is listed and skipped. Prints, per mask, the
configs by time and the packaged one (compile_kernels.py's) for comparison; the chosen values
go into compile_kernels.py by hand, and the packages are rebuilt there.
"""

import argparse
import importlib.util
import itertools
import json
import math
import os
import statistics
import time

import torch
import torch.nn.functional as F
import triton

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location(
    "attention_bwd", os.path.join(HERE, "..", "triton", "kernels", "attention_bwd.py"))
ab = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ab)

B, H, T, D = 8, 12, 1024, 64
dev = "cuda"


def timed(fn, reps=20):
    for _ in range(3):
        fn()
    ts = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        ts.append(s.elapsed_time(e) * 1e3)
    return statistics.median(ts)


def fwd(q, k, v, causal, bm, bn, warps, stages):
    o = torch.empty_like(q)
    lse = torch.empty(B, H, T, device=dev, dtype=torch.float32)
    grid = (triton.cdiv(T, bm), B * H, 1)

    def run():
        ab.attn_fwd_lse[grid](q, k, v, o, lse, 1 / math.sqrt(D), T, T, HEAD_DIM=D, BLOCK_M=bm,
                              BLOCK_N=bn, CAUSAL=causal, num_warps=warps, num_stages=stages)
    return run, o, lse


def bwd(q, k, v, o, lse, do, causal, blocks, warps, stages):
    bm1, bn1, bm2, bn2 = blocks
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    delta = torch.empty(B, H, T, device=dev, dtype=torch.float32)
    grid = (max(triton.cdiv(T, bn1), triton.cdiv(T, bm2)), B * H, 1)

    def run():
        ab.attn_bwd_preprocess[(triton.cdiv(T, 128), B * H, 1)](o, do, delta, T, HEAD_DIM=D,
                                                              BLOCK_M=128, num_warps=4)
        ab.attn_bwd[grid](q, k, v, do, lse, delta, dq, dk, dv, 1 / math.sqrt(D), T, T, HEAD_DIM=D,
                          BLOCK_M1=bm1, BLOCK_N1=bn1, BLOCK_M2=bm2, BLOCK_N2=bn2,
                          BLK_SLICE_FACTOR=2, CAUSAL=causal, num_warps=warps, num_stages=stages)
    return run, dq, dk, dv


def err(a, b):
    return ((a.float() - b.float()).abs().max() / b.float().abs().max().clamp_min(1e-6)).item()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--budget", type=float, default=420)
    ap.add_argument("--json")
    a = ap.parse_args()
    start = time.time()
    torch.manual_seed(0)
    q, k, v = (torch.randn(B, H, T, D, device=dev, dtype=torch.bfloat16) for _ in range(3))
    do = torch.randn_like(q)
    results = {}
    print(f"# {torch.cuda.get_device_name(0)}, torch {torch.__version__}, triton {triton.__version__}")
    for causal in (True, False):
        mask = "causal" if causal else "no mask"
        qr, kr, vr = (t.detach().clone().requires_grad_() for t in (q, k, v))
        ref = F.scaled_dot_product_attention(qr, kr, vr, is_causal=causal)
        ref.backward(do)
        peers = {}
        for name, backend in (("flash", torch.nn.attention.SDPBackend.FLASH_ATTENTION),
                              ("cudnn", torch.nn.attention.SDPBackend.CUDNN_ATTENTION)):
            try:
                with torch.nn.attention.sdpa_kernel(backend):
                    f_us = timed(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal))
                    qg = q.detach().clone().requires_grad_()
                    out = F.scaled_dot_product_attention(qg, k, v, is_causal=causal)
                    b_us = timed(lambda: torch.autograd.grad(out, qg, do, retain_graph=True))
                peers[name] = (f_us, b_us)
                print(f"{mask}: torch {name}: fwd {f_us:.1f} us, fwd+bwd-ish bwd {b_us:.1f} us")
            except Exception as e:  # noqa: BLE001
                print(f"{mask}: torch {name}: {e.__class__.__name__}: {str(e)[:120]}")
        rows_f, rows_b = [], []
        for bm, bn, warps, stages in itertools.product((64, 128), (32, 64, 128), (4, 8), (2, 3, 4)):
            if time.time() - start > a.budget * (0.2 if causal else 0.65):
                break
            if causal and bn > bm:
                continue  # the diagonal block's keys would run past S
            try:
                run, o, lse = fwd(q, k, v, causal, bm, bn, warps, stages)
                run()
                torch.cuda.synchronize()
                e = err(o, ref)
                us = timed(run) if e < 2e-2 else float("nan")
                rows_f.append(dict(bm=bm, bn=bn, warps=warps, stages=stages, us=us, err=e))
            except Exception as ex:  # noqa: BLE001
                rows_f.append(dict(bm=bm, bn=bn, warps=warps, stages=stages, us=float("nan"),
                                   err=f"{ex.__class__.__name__}"))
        run, o, lse = fwd(q, k, v, causal, 128, 64, 4, 3)
        run()
        for blocks, warps, stages in itertools.product(
                ((32, 128, 128, 32), (64, 128, 128, 64), (32, 64, 64, 32), (64, 64, 64, 64),
                 (16, 128, 128, 16), (32, 128, 64, 32)),
                (4, 8), (2, 3, 4, 5)):
            if time.time() - start > a.budget * (0.5 if causal else 0.95):
                break
            try:
                brun, dq, dk, dv = bwd(q, k, v, o, lse, do, causal, blocks, warps, stages)
                brun()
                torch.cuda.synchronize()
                e = max(err(dq, qr.grad), err(dk, kr.grad), err(dv, vr.grad))
                us = timed(brun) if e < 3e-2 else float("nan")
                rows_b.append(dict(blocks=blocks, warps=warps, stages=stages, us=us, err=e))
            except Exception as ex:  # noqa: BLE001
                rows_b.append(dict(blocks=blocks, warps=warps, stages=stages, us=float("nan"),
                                   err=f"{ex.__class__.__name__}"))
        results[mask] = dict(peers=peers, fwd=rows_f, bwd=rows_b)
        ok_f = sorted((r for r in rows_f if r["us"] == r["us"]), key=lambda r: r["us"])
        ok_b = sorted((r for r in rows_b if r["us"] == r["us"]), key=lambda r: r["us"])
        packaged_f = next((r for r in rows_f if (r["bm"], r["bn"], r["warps"], r["stages"]) == (128, 64, 4, 3)), None)
        packaged_b = next((r for r in rows_b if (r["blocks"], r["warps"], r["stages"]) == ((32, 128, 128, 32), 4, 5)), None)
        print(f"{mask}: forward, packaged (128, 64, 4 warps, 3 stages): {packaged_f}")
        for r in ok_f[:6]:
            print(f"  fwd BLOCK_M {r['bm']:3d} BLOCK_N {r['bn']:3d} warps {r['warps']} stages {r['stages']}: {r['us']:7.1f} us (err {r['err']:.1e})")
        print(f"{mask}: backward, packaged ((32, 128, 128, 32), 4 warps, 5 stages): {packaged_b}")
        for r in ok_b[:6]:
            print(f"  bwd blocks {r['blocks']} warps {r['warps']} stages {r['stages']}: {r['us']:7.1f} us (err {r['err']:.1e})")
        bad = [r for r in rows_f + rows_b if r["us"] != r["us"]]
        print(f"{mask}: {len(rows_f)} forward and {len(rows_b)} backward configs tried, {len(bad)} failed or wrong")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1, default=str)
    print(f"attn_tune: {time.time() - start:.0f} s")


if __name__ == "__main__":
    main()
