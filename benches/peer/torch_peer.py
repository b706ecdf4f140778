"""PyTorch peer of the thunder-rs cached-call and translation benches.

Times the same work as ``benches/cached_call.rs``:

* cached call: ``x = x * 1.01 + 0.1`` five times (10 elementwise ops) on a 1-D f32 tensor of 64
  elements, per call, in PyTorch eager and with ``torch.compile`` (inductor, CPU) after its
  first call has compiled. Each row is the mean over ``--repeats`` timed loops of ``--iters``
  calls, after ``--warmup`` untimed calls; the min over loops is shown too.
* first call (translation): how long ``torch.compile``'s first call takes for that chain and
  for the 12-block ``linear + gelu(tanh) + softmax`` MLP on x: f32[4, 16], w_i: f32[16, 16],
  b_i: f32[16] (thunder's ``translation/first_call_mlp12``), with dynamo reset and inductor's
  on-disk caches turned off so that each is a real compile. A throwaway graph is compiled
  first to take the process's one-time set-up, which is shown on its own row.
  ``--no-compile-time`` skips all this.

Given ``--thunder-json FILE`` (criterion's ``estimates.json``, whose ``mean.point_estimate``
is in ns; repeatable), it prints thunder's time and the ratio thunder / torch for each torch row
of the same work (files whose path names ``mlp`` compare with the MLP first call, the others
with the cached call).

Run from the repository root, after the benches::

    cargo build --release -p thunder-interpreter -p thunder-cli
    cargo bench -p thunder-benches
    /work/venv/bin/python benches/peer/torch_peer.py \\
        --thunder-json target/criterion/cached_call/jit_call_64xf32_10ops/new/estimates.json \\
        --thunder-json target/criterion/cached_call/program_run_64xf32_10ops/new/estimates.json \\
        --thunder-json target/criterion/translation/first_call_mlp12/new/estimates.json

Torch runs on one thread by default (``--threads``), as thunder's interpreter does.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

CHAIN_NUMEL = 64
CHAIN_MUL = 1.01
CHAIN_ADD = 0.1
CHAIN_REPEATS = 5
MLP_BLOCKS = 12
MLP_BATCH = 4
MLP_WIDTH = 16


def chain(x):
    for _ in range(CHAIN_REPEATS):
        x = x * CHAIN_MUL + CHAIN_ADD
    return x


def mlp(x, *params):
    import torch.nn.functional as F

    h = x
    for i in range(0, len(params), 2):
        h = F.linear(h, params[i], params[i + 1])
        h = F.gelu(h, approximate="tanh")
        h = F.softmax(h, dim=-1)
    return h


def per_call_ns(fn, args, iters: int, repeats: int, warmup: int) -> tuple[float, float]:
    """Mean and min over `repeats` loops of the per-call time (ns) of `fn(*args)`."""
    for _ in range(warmup):
        fn(*args)
    loops = []
    for _ in range(repeats):
        start = time.perf_counter_ns()
        for _ in range(iters):
            fn(*args)
        loops.append((time.perf_counter_ns() - start) / iters)
    return statistics.fmean(loops), min(loops)


def first_call_ns(make_fn, args) -> float:
    """Wall time of a freshly compiled function's first call (compilation included)."""
    import torch

    torch._dynamo.reset()
    fn = make_fn()
    start = time.perf_counter_ns()
    fn(*args)
    return float(time.perf_counter_ns() - start)


def fmt_ns(ns: float) -> str:
    if ns >= 1e9:
        return f"{ns / 1e9:.3f} s"
    if ns >= 1e6:
        return f"{ns / 1e6:.3f} ms"
    if ns >= 1e3:
        return f"{ns / 1e3:.3f} µs"
    return f"{ns:.1f} ns"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--iters", type=int, default=20000, help="calls per timed loop (default 20000)")
    ap.add_argument("--repeats", type=int, default=10, help="timed loops (default 10)")
    ap.add_argument("--warmup", type=int, default=2000, help="untimed calls first (default 2000)")
    ap.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (default 1)")
    ap.add_argument("--no-compile-time", action="store_true", help="skip the first-call compile timings")
    ap.add_argument("--thunder-json", action="append", default=[], type=Path, metavar="FILE",
                    help="criterion estimates.json to compare with (repeatable)")
    args = ap.parse_args()

    # Real compiles for the first-call rows: no on-disk inductor caches from earlier runs.
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="thunder-peer-inductor-"))
    import torch
    import torch._dynamo
    import torch._inductor.config as inductor_config

    inductor_config.fx_graph_cache = False
    inductor_config.autotune_local_cache = False
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)

    x = torch.randn(CHAIN_NUMEL, dtype=torch.float32)
    mlp_args = [torch.randn(MLP_BATCH, MLP_WIDTH)]
    for _ in range(MLP_BLOCKS):
        mlp_args += [torch.randn(MLP_WIDTH, MLP_WIDTH), torch.randn(MLP_WIDTH)]

    def compiled(fn):
        return lambda: torch.compile(fn, fullgraph=True, dynamic=False)

    rows: dict[str, list[tuple[str, float, float | None]]] = {"cached": [], "mlp": []}
    first: dict[str, float] = {}
    if not args.no_compile_time:
        # The process's first compile pays one-time set-up (imports, C++ toolchain checks,
        # worker pool); a throwaway graph of another shape takes it so the rows below are per graph.
        first["setup"] = first_call_ns(compiled(lambda t: t.sin() * 2.0), (torch.randn(3, 5),))
        first["chain"] = first_call_ns(compiled(chain), (x,))
        first["mlp"] = first_call_ns(compiled(mlp), mlp_args)
        rows["mlp"].append(("torch.compile first call, MLP 12 blocks", first["mlp"], None))

    eager_mean, eager_min = per_call_ns(chain, (x,), args.iters, args.repeats, args.warmup)
    with torch.inference_mode():
        inf_mean, inf_min = per_call_ns(chain, (x,), args.iters, args.repeats, args.warmup)
    torch._dynamo.reset()
    chain_c = torch.compile(chain, fullgraph=True, dynamic=False)
    chain_c(x)  # compiles
    comp_mean, comp_min = per_call_ns(chain_c, (x,), args.iters, args.repeats, args.warmup)
    torch.testing.assert_close(chain_c(x), chain(x))
    rows["cached"] += [
        ("eager", eager_mean, eager_min),
        ("eager, inference_mode", inf_mean, inf_min),
        ("torch.compile (cached)", comp_mean, comp_min),
    ]

    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread(s); "
          f"{args.repeats} loops x {args.iters} calls after {args.warmup} warm-up calls")
    print()
    print(f"cached call: {CHAIN_REPEATS}x (x*{CHAIN_MUL}+{CHAIN_ADD}) = {2 * CHAIN_REPEATS} ops on f32[{CHAIN_NUMEL}]")
    print(f"  {'':<34} {'mean/call':>12} {'min/call':>12}")
    for name, mean, mn in rows["cached"]:
        print(f"  {name:<34} {fmt_ns(mean):>12} {fmt_ns(mn):>12}")
    if first:
        print()
        print("first call (compile included), torch.compile, caches off")
        print(f"  {'throwaway graph (one-time set-up)':<34} {fmt_ns(first['setup']):>12}")
        print(f"  {'10-op chain on f32[64]':<34} {fmt_ns(first['chain']):>12}")
        print(f"  {'MLP 12 x (linear+gelu+softmax)':<34} {fmt_ns(first['mlp']):>12}")

    for path in args.thunder_json:
        est = json.loads(path.read_text())
        thunder_ns = float(est["mean"]["point_estimate"])
        label = "/".join(path.parts[-4:-2]) if len(path.parts) >= 4 else str(path)
        work = "mlp" if "mlp" in str(path) else "cached"
        print()
        print(f"thunder {label}: {fmt_ns(thunder_ns)} (criterion mean)")
        if not rows[work]:
            print("  nothing to compare with (run without --no-compile-time)")
        for name, mean, _ in rows[work]:
            print(f"  thunder / {name:<40} {thunder_ns / mean:10.4g}x")


if __name__ == "__main__":
    main()
