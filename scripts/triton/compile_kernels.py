#!/usr/bin/env python3
"""Compiles the repo's Triton kernels ahead of time into thunder-rs kernel packages.

    python scripts/triton/compile_kernels.py [--out executors/triton/kernels] [--arch 90]

No GPU is needed: Triton compiles for a named target. Each variant becomes a folder

    <out>/<variant>/kernel.toml      the manifest: symbol, dtypes, constraints, params, grid
                    <name>.cubin     what the plugin loads (built for --arch exactly)
                    <name>.ptx       kept for reading and for checking the parameter list
                    metadata.json    Triton's compile metadata (num_warps, shared, scratch, ...)

The manifest format is documented in docs/triton-kernels.md. The plugin never runs Python:
the packages are committed.

For sm_90 Triton 3.9 defaults to its CUDA 13 `ptxas-blackwell`; the cubins are built with the
bundled CUDA 12 `ptxas` instead (and a matching PTX ISA version), so that they load on CUDA 12
drivers as well as 13 (CUDA's minor-version compatibility covers cubins, not PTX).
"""

import argparse
import json
import os
import re
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "kernels"))


def ptxas_12(triton_dir: Path):
    """The bundled CUDA 12 ptxas, or None."""
    p = triton_dir / "backends" / "nvidia" / "bin" / "ptxas"
    return p if p.exists() else None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(HERE.parent.parent / "executors" / "triton" / "kernels"))
    ap.add_argument("--arch", type=int, default=90, help="compute capability as major*10+minor")
    ap.add_argument("--only", default="", help="comma-separated variant names")
    args = ap.parse_args()

    import triton
    ptxas = ptxas_12(Path(triton.__file__).parent)
    if ptxas is not None and not os.environ.get("TRITON_PTXAS_BLACKWELL_PATH"):
        os.environ["TRITON_PTXAS_BLACKWELL_PATH"] = str(ptxas)
    os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    # No line tables: they are most of a cubin's and a PTX's size and are only for profilers.
    os.environ.setdefault("TRITON_DISABLE_LINE_INFO", "1")
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    import attention
    import attention_bwd
    import rms_norm

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    only = {s for s in args.only.split(",") if s}
    target = GPUTarget("cuda", args.arch, 32)
    for v in variants(attention, rms_norm, attention_bwd):
        if only and v["name"] not in only:
            continue
        d = out / v["name"]
        if d.exists():
            shutil.rmtree(d)
        d.mkdir(parents=True)
        # A variant is one kernel launch (the manifest's flat form, metadata.json) or several
        # (`launches`: one `[[launch]]` table each, metadata in <kernel>.json).
        multi = "launches" in v
        built = []
        for launch in (v["launches"] if multi else [v]):
            src = ASTSource(fn=launch["fn"], signature=launch["signature"],
                            constexprs=launch["constexprs"], attrs=divisibility(launch))
            opts = dict(launch["options"])
            if ptxas is not None:
                opts.setdefault("ptx_version", 88)  # the highest ISA CUDA 12.9's ptxas accepts
            k = triton.compile(src, target=target, options=opts)
            md = metadata_json(k.metadata)
            name = md["name"]
            md_file = f"{name}.json" if multi else "metadata.json"
            (d / f"{name}.cubin").write_bytes(k.asm["cubin"])
            (d / f"{name}.ptx").write_text(k.asm["ptx"])
            (d / md_file).write_text(json.dumps(md, indent=1, sort_keys=True) + "\n")
            m = re.search(r"^\.version (\d+)\.(\d+)", k.asm["ptx"], re.MULTILINE)
            ptx_isa = f"{m.group(1)}.{m.group(2)}" if m else "unknown"
            built.append((launch, name, md_file, md))
            print(f"{d}: {name} warps={md['num_warps']} shared={md['shared']} "
                  f"cubin={len(k.asm['cubin'])}B ptx ISA {ptx_isa}")
        text = multi_manifest(v, built, ptx_isa) if multi else manifest(v, built[0][1], ptx_isa, built[0][3])
        (d / "kernel.toml").write_text(text)


def divisibility(launch):
    """Triton's `tt.divisibility` hints, as its JIT would specialize a call: every pointer is
    16-byte aligned (the manifest's `pointer_align = 16`, which the plugin checks before each
    launch), and the integers named in `divisible_by_16` are multiples of 16 (the variant's
    constraints must imply it). Without them loads and stores are scalar, not vectorized."""
    names = list(launch["signature"].keys())
    attrs = {}
    for i, (n, t) in enumerate(launch["signature"].items()):
        if t.startswith("*") or n in launch.get("divisible_by_16", ()):
            attrs[(i,)] = [["tt.divisibility", 16]]
    assert all(n in names for n in launch.get("divisible_by_16", ())), launch.get("divisible_by_16")
    return attrs


def metadata_json(metadata):
    """Triton's metadata as JSON (the GPUTarget as a dict, local file paths dropped)."""
    md = metadata._asdict()
    t = md["target"]
    md["target"] = {"backend": t.backend, "arch": t.arch, "warp_size": t.warp_size}
    md.pop("extern_libs", None)
    return {k: v for k, v in md.items() if isinstance(v, (int, float, str, bool, list, dict, type(None)))}


def toml_str_list(xs):
    return "[" + ", ".join(json.dumps(x) for x in xs) + "]"


def manifest(v, name, ptx_isa, md):
    lines = [
        f"# Generated by scripts/triton/compile_kernels.py from {v['source']}; see docs/triton-kernels.md.",
        f"symbol = {json.dumps(v['symbol'])}",
        f"kernel = {json.dumps(name)}",
        f"cubin = {json.dumps(name + '.cubin')}",
        f"ptx = {json.dumps(name + '.ptx')}",
        'metadata = "metadata.json"',
        f"ptx_isa = {json.dumps(ptx_isa)}",
        f"triton_version = {json.dumps(md.get('triton_version', ''))}",
        f"description = {json.dumps(v['description'])}",
        "# Every tensor's address is a multiple of this many bytes (the cubin assumes it).",
        "pointer_align = 16",
        "# The symbol's positional arguments, named for the expressions below.",
        f"args = {toml_str_list(v['args'])}",
        f"outputs = {toml_str_list(v['outputs'])}",
        "# Triton's signature of the kernel's runtime parameters (constexprs are baked in).",
        f"signature = {toml_str_list([t for t in v['signature'].values() if t != 'constexpr'])}",
        f"constexprs = {{ {', '.join(f'{k} = {json.dumps(x)}' for k, x in v['constexprs'].items())} }}",
        "# One expression per signature entry.",
        f"params = {toml_str_list(v['params'])}",
        "# Every condition must hold for the op to be claimed; otherwise it is decomposed.",
        f"constraints = {toml_str_list(v['constraints'])}",
        f"grid = {toml_str_list(v['grid'])}",
        "",
        "[dtypes]",
    ]
    lines += [f"{k} = {json.dumps(x)}" for k, x in v["dtypes"].items()]
    return "\n".join(lines) + "\n"


def multi_manifest(v, built, ptx_isa):
    """The manifest of a package of several launches (docs/triton-kernels.md, "Several launches")."""
    md0 = built[0][3]
    lines = [
        f"# Generated by scripts/triton/compile_kernels.py from {v['source']}; see docs/triton-kernels.md.",
        f"symbol = {json.dumps(v['symbol'])}",
        f"ptx_isa = {json.dumps(ptx_isa)}",
        f"triton_version = {json.dumps(md0.get('triton_version', ''))}",
        f"description = {json.dumps(v['description'])}",
        "# Every tensor's address is a multiple of this many bytes (the cubin assumes it).",
        "pointer_align = 16",
        "# The symbol's positional arguments and outputs, named for the expressions below.",
        f"args = {toml_str_list(v['args'])}",
        f"outputs = {toml_str_list(v['outputs'])}",
        "# Every condition must hold for the op to be claimed; otherwise it is decomposed.",
        f"constraints = {toml_str_list(v['constraints'])}",
        "",
        "[dtypes]",
    ]
    lines += [f"{k} = {json.dumps(x)}" for k, x in v["dtypes"].items()]
    if v.get("scratch"):
        lines += ["", "# Buffers the launches share, from the host's pool for each run (uninitialized)."]
        lines += ["[scratch]"]
        lines += [f"{k} = {{ dtype = {json.dumps(x['dtype'])}, numel = {json.dumps(x['numel'])} }}"
                  for k, x in v["scratch"].items()]
    for launch, name, md_file, _ in built:
        lines += [
            "",
            "# Launched in this order on the run's stream.",
            "[[launch]]",
            f"kernel = {json.dumps(name)}",
            f"cubin = {json.dumps(name + '.cubin')}",
            f"ptx = {json.dumps(name + '.ptx')}",
            f"metadata = {json.dumps(md_file)}",
            f"signature = {toml_str_list([t for t in launch['signature'].values() if t != 'constexpr'])}",
            f"constexprs = {{ {', '.join(f'{k} = {json.dumps(x)}' for k, x in launch['constexprs'].items())} }}",
            f"params = {toml_str_list(launch['params'])}",
            f"grid = {toml_str_list(launch['grid'])}",
        ]
    return "\n".join(lines) + "\n"


def attention_train_variants(attention_bwd, dt, tri):
    """sdpa_fwd_lse and sdpa_bwd packages for one dtype (interpret_check.py uses the same
    block sizes)."""
    t = f"*{tri[dt]}"
    for d in [64, 128]:
        for causal in [False, True]:
            suffix = f"{dt}_d{d}{'_causal' if causal else ''}"
            mode = "causal" if causal else "no mask"
            shape_checks = [
                "q.rank == 4", "k.rank == 4", "v.rank == 4",
                f"q.shape[3] == {d}", f"k.shape[3] == {d}", f"v.shape[3] == {d}",
                "k.shape[0] == q.shape[0]", "k.shape[1] == q.shape[1]",
                "v.shape[0] == q.shape[0]", "v.shape[1] == q.shape[1]",
                "v.shape[2] == k.shape[2]",
                "q.shape[2] > 0", "k.shape[2] > 0",
                "q.numel < 2147483648", "k.numel < 2147483648",
                f"is_causal == {'true' if causal else 'false'}",
            ]
            scale = "default(scale, 1 / sqrt(q.shape[3]))"
            # Causal head dim 64 as scripts/gpu/attn_tune.py chose (64x64 blocks): 62.9 against
            # 69.0 us on an H100 (B8 H12 T1024 bf16, thunder bench). Its other picks, from Triton
            # 3.6's JIT, did not carry over to these 3.9 cubins (the backward without a mask went
            # from 216.5 to 261.7 us), so the rest keep the tutorial's sizes.
            if d == 64 and causal:
                bm, bn, fwd_warps, fwd_stages = 64, 64, 4, 3
            else:
                bm, bn, fwd_warps, fwd_stages = 128, 64, 4 if d == 64 else 8, 3
            yield {
                "name": f"sdpa_fwd_lse_{suffix}",
                "source": "scripts/triton/kernels/attention_bwd.py",
                "symbol": "ltorch.sdpa_fwd_lse",
                "description": f"flash attention forward saving the row log-sum-exp (f32, natural log), "
                               f"{dt}, head_dim {d}, {mode}, BLOCK_M {bm}, BLOCK_N {bn}",
                "args": ["q", "k", "v", "is_causal", "scale"],
                "outputs": ["o", "lse"],
                "dtypes": {"q": dt, "k": dt, "v": dt, "o": dt, "lse": "f32"},
                "constraints": shape_checks + [f"q.shape[2] % {bm} == 0", f"k.shape[2] % {bn} == 0"],
                "launches": [{
                    "fn": attention_bwd.attn_fwd_lse,
                    "signature": {"Q": t, "K": t, "V": t, "O": t, "LSE": "*fp32", "sm_scale": "fp32",
                                  "L": "i32", "S": "i32", "HEAD_DIM": "constexpr",
                                  "BLOCK_M": "constexpr", "BLOCK_N": "constexpr", "CAUSAL": "constexpr"},
                    "constexprs": {"HEAD_DIM": d, "BLOCK_M": bm, "BLOCK_N": bn, "CAUSAL": causal},
                    "options": {"num_warps": fwd_warps, "num_stages": fwd_stages},
                    "params": ["q", "k", "v", "o", "lse", scale, "q.shape[2]", "k.shape[2]"],
                    "divisible_by_16": ["L", "S"],
                    "grid": [f"cdiv(q.shape[2], {bm})", "q.shape[0] * q.shape[1]", "1"],
                }],
            }
            # Backward: as the tutorial, BLOCK_M1 = BLOCK_N2 = 32 and BLOCK_N1 = BLOCK_M2 = 128, so
            # both L and S must be multiples of 128.
            wide = 128
            blocks = {"BLOCK_M1": 32, "BLOCK_N1": wide, "BLOCK_M2": wide, "BLOCK_N2": 32,
                      "BLK_SLICE_FACTOR": 2}
            pre = wide
            bwd_warps, bwd_stages = (4, 5) if d == 64 else (8, 3)
            yield {
                "name": f"sdpa_bwd_{suffix}",
                "source": "scripts/triton/kernels/attention_bwd.py",
                "symbol": "ltorch.sdpa_bwd",
                "description": f"flash attention backward (delta preprocess, then dK/dV and dQ in one kernel), "
                               f"{dt}, head_dim {d}, {mode}",
                "args": ["do", "q", "k", "v", "o", "lse", "is_causal", "scale"],
                "outputs": ["dq", "dk", "dv"],
                "dtypes": {"do": dt, "q": dt, "k": dt, "v": dt, "o": dt, "lse": "f32",
                           "dq": dt, "dk": dt, "dv": dt},
                "scratch": {"delta": {"dtype": "f32",
                                      "numel": "q.shape[0] * q.shape[1] * q.shape[2]"}},
                "constraints": shape_checks + [
                    "do.rank == 4", "o.rank == 4", "lse.rank == 3",
                    "do.shape[0] == q.shape[0]", "do.shape[1] == q.shape[1]",
                    "do.shape[2] == q.shape[2]", "do.shape[3] == q.shape[3]",
                    "o.shape[0] == q.shape[0]", "o.shape[1] == q.shape[1]",
                    "o.shape[2] == q.shape[2]", "o.shape[3] == q.shape[3]",
                    "lse.shape[0] == q.shape[0]", "lse.shape[1] == q.shape[1]",
                    "lse.shape[2] == q.shape[2]",
                    f"q.shape[2] % {wide} == 0", f"k.shape[2] % {wide} == 0",
                ],
                "launches": [
                    {
                        "fn": attention_bwd.attn_bwd_preprocess,
                        "signature": {"O": t, "DO": t, "Delta": "*fp32", "L": "i32",
                                      "HEAD_DIM": "constexpr", "BLOCK_M": "constexpr"},
                        "constexprs": {"HEAD_DIM": d, "BLOCK_M": pre},
                        "options": {"num_warps": 4},
                        "params": ["o", "do", "delta", "q.shape[2]"],
                        "divisible_by_16": ["L"],
                        "grid": [f"cdiv(q.shape[2], {pre})", "q.shape[0] * q.shape[1]", "1"],
                    },
                    {
                        "fn": attention_bwd.attn_bwd,
                        "signature": {"Q": t, "K": t, "V": t, "DO": t, "M": "*fp32", "Delta": "*fp32",
                                      "DQ": t, "DK": t, "DV": t, "sm_scale": "fp32", "L": "i32",
                                      "S": "i32", "HEAD_DIM": "constexpr", "BLOCK_M1": "constexpr",
                                      "BLOCK_N1": "constexpr", "BLOCK_M2": "constexpr",
                                      "BLOCK_N2": "constexpr", "BLK_SLICE_FACTOR": "constexpr",
                                      "CAUSAL": "constexpr"},
                        "constexprs": {"HEAD_DIM": d, **blocks, "CAUSAL": causal},
                        "options": {"num_warps": bwd_warps, "num_stages": bwd_stages},
                        "params": ["q", "k", "v", "do", "lse", "delta", "dq", "dk", "dv", scale,
                                   "q.shape[2]", "k.shape[2]"],
                        "divisible_by_16": ["L", "S"],
                        "grid": [f"max(cdiv(k.shape[2], {wide}), cdiv(q.shape[2], {wide}))",
                                 "q.shape[0] * q.shape[1]", "1"],
                    },
                ],
            }


def variants(attention, rms_norm, attention_bwd):
    short = {"float16": "f16", "bfloat16": "bf16", "float32": "f32"}
    tri = {"f16": "fp16", "bf16": "bf16", "f32": "fp32"}
    for dt in ["f16", "bf16"]:
        for d in [64, 128]:
            for causal in [False, True]:
                bm, bn = 128, 64
                warps = 4 if d == 64 else 8
                yield {
                    "name": f"sdpa_fwd_{dt}_d{d}{'_causal' if causal else ''}",
                    "source": "scripts/triton/kernels/attention.py",
                    "symbol": "ltorch.scaled_dot_product_attention",
                    "description": f"flash attention forward, {dt}, head_dim {d}, "
                                   f"{'causal' if causal else 'no mask'}, BLOCK_M {bm}, BLOCK_N {bn}",
                    "fn": attention.attn_fwd,
                    "signature": {"Q": f"*{tri[dt]}", "K": f"*{tri[dt]}", "V": f"*{tri[dt]}",
                                  "O": f"*{tri[dt]}", "sm_scale": "fp32", "L": "i32", "S": "i32",
                                  "HEAD_DIM": "constexpr", "BLOCK_M": "constexpr",
                                  "BLOCK_N": "constexpr", "CAUSAL": "constexpr"},
                    "constexprs": {"HEAD_DIM": d, "BLOCK_M": bm, "BLOCK_N": bn, "CAUSAL": causal},
                    "options": {"num_warps": warps, "num_stages": 3},
                    "args": ["q", "k", "v", "attn_mask", "is_causal", "scale"],
                    "outputs": ["o"],
                    "dtypes": {"q": dt, "k": dt, "v": dt, "o": dt},
                    "params": ["q", "k", "v", "o", "default(scale, 1 / sqrt(q.shape[3]))",
                               "q.shape[2]", "k.shape[2]"],
                    "divisible_by_16": ["L", "S"],
                    "constraints": [
                        "q.rank == 4", "k.rank == 4", "v.rank == 4",
                        "attn_mask == none", f"is_causal == {'true' if causal else 'false'}",
                        f"q.shape[3] == {d}", f"k.shape[3] == {d}", f"v.shape[3] == {d}",
                        "k.shape[0] == q.shape[0]", "k.shape[1] == q.shape[1]",
                        "v.shape[0] == q.shape[0]", "v.shape[1] == q.shape[1]",
                        "v.shape[2] == k.shape[2]",
                        f"q.shape[2] % {bm} == 0", f"k.shape[2] % {bn} == 0",
                        "q.shape[2] > 0", "k.shape[2] > 0",
                        "q.numel < 2147483648",
                    ],
                    "grid": [f"cdiv(q.shape[2], {bm})", "q.shape[0] * q.shape[1]", "1"],
                }
    for dt in ["f16", "bf16"]:
        yield from attention_train_variants(attention_bwd, dt, tri)
    for dt in ["f16", "bf16", "f32"]:
        eps = {"f16": 9.765625e-4, "bf16": 7.8125e-3, "f32": 1.1920928955078125e-07}[dt]
        yield {
            "name": f"rms_norm_{dt}",
            "source": "scripts/triton/kernels/rms_norm.py",
            "symbol": "ltorch.rms_norm",
            "description": f"RMSNorm over the last dim with a weight, {dt}, f32 accumulation",
            "fn": rms_norm.rms_norm_fwd,
            "signature": {"X": f"*{tri[dt]}", "W": f"*{tri[dt]}", "Y": f"*{tri[dt]}",
                          "N": "i32", "eps": "fp32", "BLOCK": "constexpr"},
            "constexprs": {"BLOCK": 1024},
            "options": {"num_warps": 4},
            "args": ["x", "normalized_shape", "weight", "eps"],
            "outputs": ["y"],
            "dtypes": {"x": dt, "weight": dt, "y": dt},
            "params": ["x", "weight", "y", "x.shape[-1]", f"default(eps, {eps!r})"],
            "constraints": ["len(normalized_shape) == 1", "x.rank >= 1", "x.shape[-1] > 0",
                            "x.numel < 2147483648", "weight.rank == 1",
                            "weight.shape[0] == x.shape[-1]"],
            "grid": ["x.numel / x.shape[-1]", "1", "1"],
        }


if __name__ == "__main__":
    main()
