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

import triton.language as tl  # noqa: E402
from triton.runtime import interpreter as _interp  # noqa: E402

import attention  # noqa: E402
import attention_bwd  # noqa: E402
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


def _patch_bf16_dot():
    """Triton 3.9's interpreter stores bf16 as uint16 and its `create_dot` multiplies those bit
    patterns as integers (fp8 is converted, bf16 is not), so every bf16 `tl.dot` is garbage under
    TRITON_INTERPRET=1. Widen bf16 operands to f32 first: exact, and what the GPU's bf16 MMA
    computes (products accumulated in f32)."""
    original = _interp.InterpreterBuilder.create_dot

    def create_dot(self, a, b, d, input_precision, max_num_imprecise_acc):
        def widen(x):
            if x.dtype.scalar == tl.bfloat16:
                return self.cast_impl(x, tl.float32)
            return x
        return original(self, widen(a), widen(b), d, input_precision, max_num_imprecise_acc)

    _interp.InterpreterBuilder.create_dot = create_dot


_patch_bf16_dot()


def attention_reference(q, k, v, causal, scale):
    """out and the natural-log lse in f64, by the definition (top-left causal mask)."""
    s = (q.double() @ k.double().transpose(-1, -2)) * scale
    if causal:
        keep = torch.ones(s.shape[-2], s.shape[-1], dtype=torch.bool).tril()
        s = s.masked_fill(~keep, float("-inf"))
    return torch.softmax(s, -1) @ v.double(), torch.logsumexp(s, -1)


def check_attention_train(dtype, b, h, l, s, d, causal, scale=None):
    """sdpa_fwd_lse then sdpa_bwd as the packages launch them (the grids and block sizes of
    compile_kernels.py), against torch autograd through the f64 math."""
    g = torch.Generator().manual_seed(2)
    q, k, v = (torch.randn(b, h, n, d, generator=g).to(dtype) for n in (l, s, s))
    do = torch.randn(b, h, l, d, generator=g).to(dtype)
    sm_scale = scale if scale is not None else 1 / math.sqrt(d)
    fwd, pre_block, bwd = attention_blocks(dtype, d, causal)
    o = torch.empty_like(q)
    lse = torch.empty(b, h, l, dtype=torch.float32)
    attention_bwd.attn_fwd_lse[(triton_cdiv(l, fwd["BLOCK_M"]), b * h, 1)](
        q, k, v, o, lse, sm_scale, l, s, HEAD_DIM=d, CAUSAL=causal, **fwd)
    delta = torch.empty(b, h, l, dtype=torch.float32)
    attention_bwd.attn_bwd_preprocess[(triton_cdiv(l, pre_block), b * h, 1)](
        o, do, delta, l, HEAD_DIM=d, BLOCK_M=pre_block)
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    programs = max(triton_cdiv(s, bwd["BLOCK_N1"]), triton_cdiv(l, bwd["BLOCK_M2"]))
    attention_bwd.attn_bwd[(programs, b * h, 1)](
        q, k, v, do, lse, delta, dq, dk, dv, sm_scale, l, s, HEAD_DIM=d, CAUSAL=causal, **bwd)

    qq, kk, vv = (t.double().requires_grad_() for t in (q, k, v))
    want_o, want_lse = attention_reference(qq, kk, vv, causal, sm_scale)
    want_o.backward(do.double())
    tol = 2e-2 if dtype == torch.float16 else 6e-2
    errs = {}
    for name, got, want in [("out", o, want_o.detach()), ("lse", lse, want_lse.detach()),
                            ("dq", dq, qq.grad), ("dk", dk, kk.grad), ("dv", dv, vv.grad)]:
        # Relative to the reference's largest magnitude (gradients grow with the sizes).
        errs[name] = (got.double() - want).abs().max().item() / max(want.abs().max().item(), 1.0)
    ok = all(e < tol for e in errs.values())
    shown = " ".join(f"{n} {e:.1e}" for n, e in errs.items())
    print(f"attention fwd_lse+bwd {dtype} B{b} H{h} L{l} S{s} D{d} causal={causal}"
          f"{'' if scale is None else f' scale={scale}'}: max err/max|ref| {shown} {'ok' if ok else 'FAIL'}")
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


# As compile_kernels.py builds the packages.
PACKAGES = Path(__file__).resolve().parent.parent.parent / "executors" / "triton" / "kernels"


def launch_constexprs(package, kernel):
    """The block sizes (constexprs other than HEAD_DIM and CAUSAL) and launch options a package's
    manifest gives `kernel`, so the check runs what compile_kernels.py built."""
    import tomllib

    manifest = tomllib.loads((PACKAGES / package / "kernel.toml").read_text())
    launch = next(x for x in manifest["launch"] if x["kernel"] == kernel)
    return {k: v for k, v in launch["constexprs"].items() if k not in ("HEAD_DIM", "CAUSAL")}


def attention_blocks(dtype, d, causal):
    """(forward, delta preprocess, backward) block sizes of the packages for these inputs (f32 has
    no package: the bf16 one's sizes)."""
    dt = {torch.float16: "f16"}.get(dtype, "bf16")
    suffix = f"{dt}_d{d}{'_causal' if causal else ''}"
    return (launch_constexprs(f"sdpa_fwd_lse_{suffix}", "attn_fwd_lse"),
            launch_constexprs(f"sdpa_bwd_{suffix}", "attn_bwd_preprocess")["BLOCK_M"],
            launch_constexprs(f"sdpa_bwd_{suffix}", "attn_bwd"))


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
        check_attention(torch.bfloat16, 1, 2, 256, 192, 64, True),
        check_attention_train(torch.float16, 1, 2, 128, 128, 64, False),
        check_attention_train(torch.float16, 1, 2, 128, 128, 64, True),
        check_attention_train(torch.bfloat16, 2, 1, 256, 256, 64, True),
        check_attention_train(torch.bfloat16, 1, 1, 256, 256, 64, False),
        check_attention_train(torch.float16, 1, 1, 256, 128, 64, True),
        check_attention_train(torch.float16, 1, 1, 128, 384, 64, True, scale=0.3),
        check_attention_train(torch.bfloat16, 1, 1, 384, 256, 64, False),
        check_attention_train(torch.float16, 1, 1, 128, 256, 64, False),
        check_attention_train(torch.float16, 1, 1, 256, 256, 128, True),
        check_attention_train(torch.bfloat16, 1, 1, 128, 256, 128, False),
        check_attention_train(torch.bfloat16, 1, 2, 384, 128, 128, True),
        check_rms(torch.float32, 3, 100, 1e-5),
        check_rms(torch.float16, 2, 2500, 9.765625e-4),
        check_rms(torch.float32, 2, 4096, 1e-6),
    ]
    if not all(results):
        sys.exit(1)
    print(f"all {len(results)} interpreter checks pass")


if __name__ == "__main__":
    main()
