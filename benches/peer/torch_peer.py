"""PyTorch peer of the thunder-rs cached-call, translation and train-step benches.

Section ``cached`` times the same work as ``benches/cached_call.rs``:

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

Section ``train`` times the same work as ``benches/train_step.rs``: one training step of an MLP
64 -> 128 -> 128 -> 10 (``nn.Sequential`` of ``Linear``/``ReLU``, default init), batch 256, f32,
``F.cross_entropy`` against class indices, ``torch.optim.SGD(lr=0.01, momentum=0.9)``: per step
``zero_grad``, forward, ``backward``, ``step``, each step feeding the next as thunder's bench does.
It runs in PyTorch eager with as many threads as the machine gives this process, and with one
thread (thunder's interpreter is single-threaded). Each row is the mean over ``--repeats`` loops
of ``--train-iters`` steps after ``--train-warmup`` untimed steps. The loss of the first few
steps is printed as a check that it falls. ``--sections`` picks the sections (default both).

Given ``--thunder-json FILE`` (criterion's ``estimates.json``, whose ``mean.point_estimate``
is in ns; repeatable), it prints thunder's time and the ratio thunder / torch for each torch row
of the same work (files whose path names ``train_step`` compare with the train step, those
naming ``mlp`` with the MLP first call, the others with the cached call).

Run from the repository root, after the benches::

    cargo build --release -p thunder-interpreter -p thunder-cli
    cargo bench -p thunder-benches
    /work/venv/bin/python benches/peer/torch_peer.py \\
        --thunder-json target/criterion/cached_call/jit_call_64xf32_10ops/new/estimates.json \\
        --thunder-json target/criterion/cached_call/program_run_64xf32_10ops/new/estimates.json \\
        --thunder-json target/criterion/translation/first_call_mlp12/new/estimates.json \\
        --thunder-json target/criterion/train_step/fused_jit_step/new/estimates.json \\
        --thunder-json target/criterion/train_step/value_and_grad_then_sgd/new/estimates.json

The cached section runs torch on one thread by default (``--threads``), as thunder's interpreter
does; the train section sets its own thread counts (see above).
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
TRAIN_LAYERS = [(64, 128), (128, 128), (128, 10)]
TRAIN_BATCH = 256
TRAIN_LR = 0.01
TRAIN_MOMENTUM = 0.9
TRAIN_CHECK_STEPS = 5


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


def make_train_step():
    """The train-step bench's model, optimizer and batch, and a function doing one step."""
    import torch
    import torch.nn.functional as F
    from torch import nn

    torch.manual_seed(0)
    layers: list[nn.Module] = []
    for i, (fan_in, fan_out) in enumerate(TRAIN_LAYERS):
        layers.append(nn.Linear(fan_in, fan_out))
        if i + 1 < len(TRAIN_LAYERS):
            layers.append(nn.ReLU())
    model = nn.Sequential(*layers)
    opt = torch.optim.SGD(model.parameters(), lr=TRAIN_LR, momentum=TRAIN_MOMENTUM)
    x = torch.randn(TRAIN_BATCH, TRAIN_LAYERS[0][0])
    y = torch.randint(0, TRAIN_LAYERS[-1][1], (TRAIN_BATCH,))

    def step():
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    return step


def machine_threads() -> int:
    """CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


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
    ap.add_argument("--sections", default="cached,train",
                    help="comma-separated sections to run: cached, train (default both)")
    ap.add_argument("--train-iters", type=int, default=200, help="train steps per timed loop (default 200)")
    ap.add_argument("--train-warmup", type=int, default=50, help="untimed train steps first (default 50)")
    ap.add_argument("--thunder-json", action="append", default=[], type=Path, metavar="FILE",
                    help="criterion estimates.json to compare with (repeatable)")
    args = ap.parse_args()
    sections = {s.strip() for s in args.sections.split(",") if s.strip()}
    if not sections <= {"cached", "train"}:
        ap.error(f"unknown section(s) {sorted(sections - {'cached', 'train'})}; pick from cached, train")

    # Real compiles for the first-call rows: no on-disk inductor caches from earlier runs.
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="thunder-peer-inductor-"))
    import torch
    import torch._dynamo
    import torch._inductor.config as inductor_config

    inductor_config.fx_graph_cache = False
    inductor_config.autotune_local_cache = False
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)

    rows: dict[str, list[tuple[str, float, float | None]]] = {"cached": [], "mlp": [], "train": []}
    first: dict[str, float] = {}
    if "cached" in sections:
        x = torch.randn(CHAIN_NUMEL, dtype=torch.float32)
        mlp_args = [torch.randn(MLP_BATCH, MLP_WIDTH)]
        for _ in range(MLP_BLOCKS):
            mlp_args += [torch.randn(MLP_WIDTH, MLP_WIDTH), torch.randn(MLP_WIDTH)]

        def compiled(fn):
            return lambda: torch.compile(fn, fullgraph=True, dynamic=False)

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

    train_losses: dict[int, list[float]] = {}
    if "train" in sections:
        machine = machine_threads()
        for threads in dict.fromkeys([machine, 1]):
            torch.set_num_threads(threads)
            step = make_train_step()
            train_losses[threads] = [step().item() for _ in range(TRAIN_CHECK_STEPS)]
            mean, mn = per_call_ns(step, (), args.train_iters, args.repeats, args.train_warmup)
            name = f"eager, {threads} thread{'s' if threads > 1 else ''}"
            rows["train"].append((name, mean, mn))
        torch.set_num_threads(args.threads)
        print()
        print(f"torch {torch.__version__}; train step: MLP {' -> '.join(str(d) for d in [TRAIN_LAYERS[0][0]] + [o for _, o in TRAIN_LAYERS])}, "
              f"batch {TRAIN_BATCH}, f32, cross_entropy, SGD(lr={TRAIN_LR}, momentum={TRAIN_MOMENTUM}); "
              f"{args.repeats} loops x {args.train_iters} steps after {args.train_warmup} warm-up steps "
              f"(machine: {machine} CPU(s))")
        print(f"  {'':<34} {'mean/step':>12} {'min/step':>12}")
        for name, mean, mn in rows["train"]:
            print(f"  {name:<34} {fmt_ns(mean):>12} {fmt_ns(mn):>12}")
        for threads, losses in train_losses.items():
            print(f"  loss over the first {TRAIN_CHECK_STEPS} steps, {threads} thread(s): "
                  + ", ".join(f"{l:.6f}" for l in losses))

    for path in args.thunder_json:
        est = json.loads(path.read_text())
        thunder_ns = float(est["mean"]["point_estimate"])
        label = "/".join(path.parts[-4:-2]) if len(path.parts) >= 4 else str(path)
        if "train_step" in str(path):
            work = "train"
        elif "mlp" in str(path):
            work = "mlp"
        else:
            work = "cached"
        print()
        print(f"thunder {label}: {fmt_ns(thunder_ns)} (criterion mean)")
        if not rows[work]:
            hint = {"train": "--sections including train",
                    "mlp": "--sections including cached, without --no-compile-time",
                    "cached": "--sections including cached"}[work]
            print(f"  nothing to compare with (run with {hint})")
        for name, mean, _ in rows[work]:
            print(f"  thunder / {name:<40} {thunder_ns / mean:10.4g}x")


if __name__ == "__main__":
    main()
