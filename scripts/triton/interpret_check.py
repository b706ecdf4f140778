#!/usr/bin/env python3
"""Runs the kernel sources under Triton's CPU interpreter (TRITON_INTERPRET=1) against PyTorch,
with the grids and parameters the packages' manifests compute. No GPU needed; this checks the
kernels' math and indexing, not the cubins or the Rust launcher (scripts/gpu/triton_check.sh
does that on a GPU).

    TRITON_INTERPRET=1 python scripts/triton/interpret_check.py
"""

import math
import os
import sys
from pathlib import Path

os.environ["TRITON_INTERPRET"] = "1"
sys.path.insert(0, str(Path(__file__).resolve().parent / "kernels"))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import attention  # noqa: E402
import rms_norm  # noqa: E402


def check_attention(dtype, b, h, l, s, d, causal, scale=None):
    g = torch.Generator().manual_seed(0)
    q = torch.randn(b, h, l, d, generator=g).to(dtype)
    k = torch.randn(b, h, s, d, generator=g).to(dtype)
    v = torch.randn(b, h, s, d, generator=g).to(dtype)
    o = torch.empty_like(q)
    sm_scale = scale if scale is not None else 1 / math.sqrt(d)
    # As the manifest: grid (cdiv(L, 128), B*H, 1), BLOCK_M 128, BLOCK_N 64.
    grid = (triton_cdiv(l, 128), b * h, 1)
    attention.attn_fwd[grid](q, k, v, o, sm_scale, l, s, HEAD_DIM=d, BLOCK_M=128, BLOCK_N=64, CAUSAL=causal)
    mask = None
    if causal:
        mask = torch.ones(l, s, dtype=torch.bool).tril()
    want = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), attn_mask=mask, scale=sm_scale)
    err = (o.float() - want).abs().max().item()
    ok = err < 2e-2
    print(f"attention {dtype} B{b} H{h} L{l} S{s} D{d} causal={causal}: max abs err {err:.2e} {'ok' if ok else 'FAIL'}")
    return ok


def check_rms(dtype, rows, n, eps):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(rows, n, generator=g).to(dtype)
    w = torch.randn(n, generator=g).to(dtype)
    y = torch.empty_like(x)
    rms_norm.rms_norm_fwd[(rows, 1, 1)](x, w, y, n, eps, BLOCK=1024)
    xf = x.float()
    want = (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * w.float()).to(dtype)
    err = (y.float() - want.float()).abs().max().item()
    ok = err < (1e-2 if dtype != torch.float32 else 1e-5)
    print(f"rms_norm {dtype} [{rows}, {n}]: max abs err {err:.2e} {'ok' if ok else 'FAIL'}")
    return ok


def triton_cdiv(a, b):
    return (a + b - 1) // b


def main():
    results = [
        check_attention(torch.float16, 1, 2, 128, 128, 64, False),
        check_attention(torch.float16, 1, 2, 128, 128, 64, True),
        check_attention(torch.float16, 1, 1, 256, 256, 64, True),
        check_attention(torch.float16, 1, 1, 128, 192, 64, True, scale=0.3),
        check_attention(torch.float16, 1, 1, 384, 256, 64, True),
        check_attention(torch.float16, 2, 1, 256, 128, 64, True),
        check_attention(torch.float16, 1, 1, 128, 128, 128, False),
        check_attention(torch.float32, 1, 1, 128, 64, 64, False),
        check_rms(torch.float32, 3, 100, 1e-5),
        check_rms(torch.float16, 2, 2500, 9.765625e-4),
        check_rms(torch.float32, 2, 4096, 1e-6),
    ]
    if not all(results):
        sys.exit(1)
    print(f"all {len(results)} interpreter checks pass")


if __name__ == "__main__":
    main()
