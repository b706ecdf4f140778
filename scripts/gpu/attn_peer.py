#!/usr/bin/env python3
"""Attention training through thunder-rs (thunder_rs wheel, Triton packages) beside PyTorch on
the same GPU, in one process (issue 17, flash-attention backward).

    THUNDER_CONFIG=plugins.toml python3 scripts/gpu/attn_peer.py [--json out.json] [--reps 30]

scripts/gpu/triton_check.sh runs it after `thunder triton-check` (see that script for the build).

1. Correctness: `thunder_rs.jit(F.scaled_dot_product_attention)` forward and backward on small
   shapes (f16/bf16, head dim 64/128, causal or not, L != S) against PyTorch's math in f32 on the
   same inputs: out, dq, dk, dv, with the max error relative to the reference's largest
   magnitude. The row log-sum-exp is not an output of SDPA: it is checked against an f32
   `logsumexp` by `thunder triton-check` (ltorch.sdpa_fwd_lse against the interpreter) and, through
   the gradients, here (a wrong lse gives wrong dq/dk/dv). Each case also reports whether the
   execution traces show `ltorch.sdpa_fwd_lse` and `ltorch.sdpa_bwd` run by the triton executor.
2. Timing: forward + backward at B8 H12 T1024 D64 bf16 causal (and not causal), thunder against
   `F.scaled_dot_product_attention` with PyTorch's flash backend, rounds interleaved, median of
   CUDA-event times; prints thunder / torch (the issue's target: <= 1.1).

Each part catches its own errors, prints them and goes on.
"""

import argparse
import json
import math
import re
import statistics
import sys
import traceback

import torch
import torch.nn.functional as F

DTYPES = {"f16": torch.float16, "bf16": torch.bfloat16}
TOL = {torch.float16: 1e-2, torch.bfloat16: 3e-2}


def attention(causal):
    def f(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return f


def triton_ran(jf):
    """Which of sdpa_fwd_lse / sdpa_bwd the printed execution traces show under a triton region."""
    seen = set()
    for text in jf.last_traces():
        lines = text.splitlines()
        for i, line in enumerate(lines):
            if re.search(r"\btriton\.region\d+\(", line) and i + 1 < len(lines):
                m = re.search(r"ltorch\.(sdpa_fwd_lse|sdpa_bwd|scaled_dot_product_attention)\b", lines[i + 1])
                if m:
                    seen.add(m.group(1))
    return sorted(seen)


DEVICE = "cuda"


def reference(q, k, v, do, causal):
    """f32 math on the GPU, by the definition (top-left causal mask, as torch)."""
    qf, kf, vf = (t.detach().float().requires_grad_() for t in (q, k, v))
    s = (qf @ kf.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    if causal:
        keep = torch.ones(s.shape[-2], s.shape[-1], dtype=torch.bool, device=s.device).tril()
        s = s.masked_fill(~keep, float("-inf"))
    out = torch.softmax(s, -1) @ vf
    out.backward(do.float())
    return out.detach(), qf.grad, kf.grad, vf.grad


def check_case(thunder_rs, dtype, b, h, l, s, d, causal):
    g = torch.Generator(device=DEVICE).manual_seed(b * 1000 + l + s + d)
    mk = lambda n: torch.randn(b, h, n, d, device=DEVICE, dtype=dtype, generator=g)  # noqa: E731
    q, k, v = (mk(n).requires_grad_() for n in (l, s, s))
    do = mk(l)
    jf = thunder_rs.jit(attention(causal))
    out = jf(q, k, v)
    out.backward(do)
    want = reference(q, k, v, do, causal)
    errs = {}
    for name, got, w in zip(["out", "dq", "dk", "dv"], [out.detach(), q.grad, k.grad, v.grad], want):
        if got is None:
            errs[name] = float("inf")
            continue
        errs[name] = ((got.float() - w).abs().max() / w.abs().max().clamp(min=1.0)).item()
    ran = triton_ran(jf)
    ok = all(e < TOL[dtype] for e in errs.values())
    return {"dtype": str(dtype).replace("torch.", ""), "shape": [b, h, l, s, d], "causal": causal,
            "errors": errs, "triton_ran": ran, "ok": ok,
            "claimed": "sdpa_fwd_lse" in ran and "sdpa_bwd" in ran}


def correctness(thunder_rs):
    cases = []
    for dt in ["f16", "bf16"]:
        for d in [64, 128]:
            for causal in [False, True]:
                cases.append((DTYPES[dt], 2, 3, 256, 256, d, causal))
                cases.append((DTYPES[dt], 1, 2, 128, 384, d, causal))  # fewer queries than keys
                cases.append((DTYPES[dt], 1, 2, 384, 128, d, causal))  # more queries than keys
    rows = []
    print(f"{'case':44} {'out':>8} {'dq':>8} {'dk':>8} {'dv':>8}  triton ran")
    for c in cases:
        dtype, b, h, l, s, d, causal = c
        label = f"{str(dtype)[6:]} B{b} H{h} L{l} S{s} D{d}{' causal' if causal else ''}"
        try:
            r = check_case(thunder_rs, *c)
            e = r["errors"]
            flag = "ok" if r["ok"] and r["claimed"] else ("NOT CLAIMED" if r["ok"] else "FAIL")
            print(f"{label:44} {e['out']:8.1e} {e['dq']:8.1e} {e['dk']:8.1e} {e['dv']:8.1e}  "
                  f"{','.join(r['triton_ran']) or '-'} {flag}")
        except Exception as ex:  # noqa: BLE001 (a failing case is reported, the rest still run)
            r = {"case": label, "error": f"{type(ex).__name__}: {ex}"}
            print(f"{label:44} ERROR {r['error'][:300]}")
        rows.append(r)
    return rows


def time_rounds(fns, reps, rounds=5):
    """Median ms per call of each fn, rounds interleaved so drift hits both alike."""
    for f in fns.values():
        for _ in range(3):
            f()
    torch.cuda.synchronize()
    times = {n: [] for n in fns}
    for _ in range(rounds):
        for n, f in fns.items():
            for _ in range(reps):
                a, z = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record()
                f()
                z.record()
                torch.cuda.synchronize()
                times[n].append(a.elapsed_time(z))
    return {n: statistics.median(t) for n, t in times.items()}


def timing(thunder_rs, reps):
    rows = {}
    b, h, t, d = 8, 12, 1024, 64
    for causal in [True, False]:
        name = f"attn_fwd_bwd_b{b}h{h}t{t}d{d}_bf16{'_causal' if causal else ''}"
        try:
            q, k, v = (torch.randn(b, h, t, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
                       for _ in range(3))
            do = torch.randn(b, h, t, d, device="cuda", dtype=torch.bfloat16)
            jf = thunder_rs.jit(attention(causal))

            def thunder_step():
                q.grad = k.grad = v.grad = None
                jf(q, k, v).backward(do)

            def torch_step():
                q.grad = k.grad = v.grad = None
                with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.FLASH_ATTENTION):
                    F.scaled_dot_product_attention(q, k, v, is_causal=causal).backward(do)

            def torch_fwd():
                with torch.no_grad(), torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.FLASH_ATTENTION):
                    F.scaled_dot_product_attention(q, k, v, is_causal=causal)

            ms = time_rounds({"thunder": thunder_step, "torch": torch_step, "torch_fwd": torch_fwd}, reps)
            ran = triton_ran(jf)
            flops = 4 * b * h * t * t * d * (0.5 if causal else 1.0) * 3.5  # fwd 2 matmuls + bwd 5
            rows[name] = {"thunder_ms": ms["thunder"], "torch_flash_ms": ms["torch"],
                          "torch_flash_fwd_ms": ms["torch_fwd"],
                          "ratio": ms["thunder"] / ms["torch"], "triton_ran": ran,
                          "thunder_tflops": flops / (ms["thunder"] * 1e-3) / 1e12}
            print(f"{name}: thunder {ms['thunder']:.3f} ms, torch flash {ms['torch']:.3f} ms "
                  f"(its forward alone {ms['torch_fwd']:.3f} ms), thunder/torch "
                  f"{ms['thunder'] / ms['torch']:.2f}x (target <= 1.1), triton ran: {','.join(ran) or '-'}")
        except Exception as ex:  # noqa: BLE001
            rows[name] = {"error": f"{type(ex).__name__}: {ex}"}
            print(f"{name}: ERROR {rows[name]['error'][:300]}")
            traceback.print_exc()
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--reps", type=int, default=20, help="timed calls per round (5 rounds)")
    ap.add_argument("--skip-check", action="store_true")
    ap.add_argument("--skip-bench", action="store_true")
    ap.add_argument("--device", default="cuda", help="cpu: a smoke test of the script (decomposed, no Triton)")
    args = ap.parse_args()
    global DEVICE
    DEVICE = args.device
    name = torch.cuda.get_device_name() if DEVICE.startswith("cuda") else "cpu"
    result = {"device": name, "torch": torch.__version__}
    print(f"device: {result['device']}, torch {torch.__version__}")
    try:
        import thunder_rs
    except Exception as ex:  # noqa: BLE001
        print(f"cannot import thunder_rs: {ex}")
        sys.exit(1)
    status = 0
    if not args.skip_check:
        print("\n== correctness: thunder_rs.jit(F.scaled_dot_product_attention) fwd+bwd vs f32 math "
              "(max |err| / max |ref|)")
        rows = correctness(thunder_rs)
        result["correctness"] = rows
        bad = [r for r in rows if not (r.get("ok") and r.get("claimed"))]
        print(f"{len(rows) - len(bad)} of {len(rows)} cases agree and ran on the Triton packages")
        status = 1 if bad else 0
    if not args.skip_bench:
        print("\n== timing: forward + backward, thunder (Triton packages) vs torch flash, same process")
        result["timing"] = timing(thunder_rs, args.reps)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    sys.exit(status)


if __name__ == "__main__":
    main()
