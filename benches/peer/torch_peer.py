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

Section ``issue7`` (not in the default) times the CPU workloads of ``thunder bench`` (see
``thunder-cli/src/commands/bench.rs``; the programs are in ``benches/src/lib.rs``) in PyTorch
eager and with ``torch.compile`` (first call, compile included, and steady state):

* the copy floor: copying a 64 MiB f32 buffer (2^24 elements) with numpy and with torch, best
  sample; and what a fresh 64 MiB output costs (``clone``, ``torch.zeros``; thunder's
  ``alloc_64mb`` row takes it from its caching pool);
* ``x = x*1.01+0.1`` four times (8 ops) and ``x = tanh(x*1.01+0.1)`` four times on f32[2^24];
* sgemm 2048 x 2048 (``torch.mm``, GFLOP/s; eager only: compiling one matmul calls the same
  kernel), and the same in bf16 (``bgemm_2048``);
* the cached call of the 10-op chain on f32[64] (per call);
* the MLP train step (as section ``train``: eager, and with the model ``torch.compile``-d);
* a GPT-2 block forward + backward, B 2, T 128, C 256, 4 heads (pre-norm, causal
  ``scaled_dot_product_attention`` as in thunder's ``gpt2_block``, GELU(tanh) MLP), loss
  ``mean(block(x)^2)``, with gradients for ``x`` and the 12 weights; and in eager with the
  attention written out (scores, masked softmax, product), as both sides spelled it before;
* a bf16 MLP layer forward + backward (``mlp_bf16_layer``: x bf16[512, 768], hidden 3072,
  GELU(tanh), loss the mean, gradients for x and the four weights), eager and compiled.

Each is timed like ``thunder bench`` does: one warm call that sizes the loop (calls per sample
for about 2 ms), then samples until ``--issue7-min-time`` seconds have passed and at least three
were taken; the median per call is reported, and the best sample. It runs with
``--issue7-threads`` torch threads (default: every CPU this process may use). Given
``--thunder-bench FILE`` (the output of ``thunder bench --json``; repeatable) it prints thunder's number for
each row and the ratio: thunder time / torch time (below 1: thunder is faster), or for sgemm
thunder GFLOP/s / torch GFLOP/s (above 1: thunder is faster); and each time against the copy
floor measured by thunder.

    cargo build --release
    ./target/release/thunder bench --json > /tmp/bench.json
    $VENV/bin/python benches/peer/torch_peer.py --sections issue7 --thunder-bench /tmp/bench.json

Run from the repository root, after the benches::

    cargo build --release -p thunder-interpreter -p thunder-cli
    cargo bench -p thunder-benches
    $VENV/bin/python benches/peer/torch_peer.py \\
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
import platform
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
# Section issue7 (mirrors benches/src/lib.rs).
BIG_NUMEL = 1 << 24
CHAIN8_REPEATS = 4
TANH_REPEATS = 4
SGEMM_N = 2048
GPT2_BLOCK = dict(batch=2, seq=128, embd=256, heads=4)
SAMPLE_SECONDS = 2e-3
MAX_SAMPLES = 200


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


def make_train_step(compile_model: bool = False):
    """The train-step bench's model, optimizer and batch, and a function doing one step (with
    the model under ``torch.compile`` if asked)."""
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
    forward = torch.compile(model, fullgraph=True, dynamic=False) if compile_model else model

    def step():
        opt.zero_grad()
        loss = F.cross_entropy(forward(x), y)
        loss.backward()
        opt.step()
        return loss

    return step


def chain8(x):
    for _ in range(CHAIN8_REPEATS):
        x = x * CHAIN_MUL + CHAIN_ADD
    return x


def tanh4(x):
    import torch

    for _ in range(TANH_REPEATS):
        x = torch.tanh(x * CHAIN_MUL + CHAIN_ADD)
    return x


def gpt2_block(x, causal, ln1_w, ln1_b, w_qkv, b_qkv, w_proj, b_proj, ln2_w, ln2_b, w_fc, b_fc,
               w_fc2, b_fc2, written_out=False):
    """thunder_benches::gpt2_block: x + attn(ln1(x)), then x + mlp(ln2(x)). The attention is
    ``F.scaled_dot_product_attention(is_causal=True)``, as nanoGPT and thunder's block call it;
    ``written_out`` spells it as scores, masked softmax and product instead (what both sides
    timed before thunder's block called SDPA)."""
    import torch.nn.functional as F

    b, t, c = x.shape
    h = GPT2_BLOCK["heads"]
    d = c // h
    a = F.layer_norm(x, (c,), ln1_w, ln1_b, 1e-5)
    # [B, T, 3C] -> [B, T, 3, H, D] -> [3, B, H, T, D]: the same split as thunder's.
    qkv = F.linear(a, w_qkv, b_qkv).view(b, t, 3, h, d).permute(2, 0, 3, 1, 4)
    q, k, v = qkv[0], qkv[1], qkv[2]
    if written_out:
        scores = (q @ k.transpose(-2, -1)) * (1.0 / d ** 0.5)
        att = scores.masked_fill(~causal, float("-inf")).softmax(-1) @ v
    else:
        att = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    y = att.permute(0, 2, 1, 3).reshape(b, t, c)
    x = x + F.linear(y, w_proj, b_proj)
    a = F.layer_norm(x, (c,), ln2_w, ln2_b, 1e-5)
    return x + F.linear(F.gelu(F.linear(a, w_fc, b_fc), approximate="tanh"), w_fc2, b_fc2)


def gpt2_block_loss(x, causal, *params):
    y = gpt2_block(x, causal, *params)
    return (y * y).mean()


def gpt2_block_loss_written_out(x, causal, *params):
    y = gpt2_block(x, causal, *params, written_out=True)
    return (y * y).mean()


def gpt2_block_inputs(scale: float = 0.02):
    """x: f32[B, T, C] from N(0, 1) and the block's weights (layer norms 1 + scale*N), all
    requiring grad, and the causal mask."""
    import torch

    b, t, c = GPT2_BLOCK["batch"], GPT2_BLOCK["seq"], GPT2_BLOCK["embd"]
    shapes = {"ln1_w": (c,), "ln1_b": (c,), "w_qkv": (3 * c, c), "b_qkv": (3 * c,),
              "w_proj": (c, c), "b_proj": (c,), "ln2_w": (c,), "ln2_b": (c,),
              "w_fc": (4 * c, c), "b_fc": (4 * c,), "w_fc2": (c, 4 * c), "b_fc2": (c,)}
    x = torch.randn(b, t, c).requires_grad_(True)
    params = []
    for name, shape in shapes.items():
        w = scale * torch.randn(*shape)
        if name.startswith("ln") and name.endswith("_w"):
            w = w + 1.0
        params.append(w.requires_grad_(True))
    pos = torch.arange(t)
    causal = pos.view(t, 1) >= pos
    return x, causal, params


def measure(fn, min_time: float, reps: int | None = None) -> tuple[float, float, int]:
    """Median and best per-call ns, and the sample count, as `thunder bench` times: one warm
    call sizes the loop, then samples of >= 2 ms until `min_time` s and >= 3 samples (a warm
    call over 3 * min_time is the one sample)."""
    start = time.perf_counter_ns()
    fn()
    one = (time.perf_counter_ns() - start) / 1e9
    if reps is None and one >= 3 * min_time:
        return one * 1e9, one * 1e9, 1
    calls = min(max(1, int(-(-SAMPLE_SECONDS // max(one, 1e-9)))), 100_000)
    samples: list[float] = []
    begin = time.perf_counter()
    while True:
        t = time.perf_counter_ns()
        for _ in range(calls):
            fn()
        samples.append((time.perf_counter_ns() - t) / calls)
        elapsed = time.perf_counter() - begin
        if reps is not None:
            if len(samples) >= max(reps, 1):
                break
        elif len(samples) >= MAX_SAMPLES or (elapsed >= min_time and (len(samples) >= 3 or elapsed >= 3 * min_time)):
            break
    return statistics.median(samples), min(samples), len(samples)


def timed_first(fn) -> tuple[float, object]:
    """Wall ns of one call, and its result."""
    start = time.perf_counter_ns()
    out = fn()
    return float(time.perf_counter_ns() - start), out


def run_issue7(args) -> list[dict]:
    """Times the `thunder bench` workloads in torch; returns rows
    {work, variant, unit, median, best, first_call_ns}; work names match thunder's."""
    import numpy as np
    import torch
    import torch._dynamo

    torch.set_num_threads(args.issue7_threads or machine_threads())
    min_time, reps = args.issue7_min_time, args.issue7_reps
    rows: list[dict] = []

    def row(work, variant, unit, median, best, first=None, samples=None):
        rows.append(dict(work=work, variant=variant, unit=unit, median=median, best=best,
                         first_call_ns=first, samples=samples))
        extra = f", first call {fmt_ns(first)}" if first is not None else ""
        if unit == "GFLOP/s":
            print(f"  {work:<22} {variant:<28} {median:10.2f} GFLOP/s (best {best:.2f}){extra}", flush=True)
        else:
            print(f"  {work:<22} {variant:<28} {fmt_ns(median):>12} (best {fmt_ns(best)}){extra}", flush=True)

    def compiled(fn):
        torch._dynamo.reset()
        return torch.compile(fn, fullgraph=True, dynamic=False)

    print(f"torch {torch.__version__}, numpy {np.__version__}, {torch.get_num_threads()} torch thread(s); "
          f"samples >= {min_time} s per row")
    print(f"cpu: {cpu_model()}; torch dispatches to {torch.backends.cpu.get_cpu_capability()}")

    # Copy floor.
    src = np.arange(BIG_NUMEL, dtype=np.float32)
    dst = np.ones_like(src)
    med, best, n = measure(lambda: np.copyto(dst, src), min_time, reps)
    row("copy_64mb", "numpy copyto", "ns", med, best, samples=n)
    tsrc, tdst = torch.from_numpy(src), torch.ones(BIG_NUMEL)
    med, best, n = measure(lambda: tdst.copy_(tsrc), min_time, reps)
    row("copy_64mb", "torch copy_", "ns", med, best, samples=n)
    med, best, n = measure(lambda: tsrc.clone(), min_time, reps)
    row("copy_64mb", "torch clone (fresh out)", "ns", med, best, samples=n)
    med, best, n = measure(lambda: torch.zeros(BIG_NUMEL), min_time, reps)
    row("alloc_64mb", "torch.zeros", "ns", med, best, samples=n)

    # Elementwise chains on 2^24 elements.
    x = torch.linspace(-1, 1, BIG_NUMEL)
    for work, fn in [("chain8_16m", chain8), ("tanh4_16m", tanh4)]:
        with torch.inference_mode():
            med, best, n = measure(lambda: fn(x), min_time, reps)
            row(work, "eager", "ns", med, best, samples=n)
            c = compiled(fn)
            first, out = timed_first(lambda: c(x))
            torch.testing.assert_close(out, fn(x))
            med, best, n = measure(lambda: c(x), min_time, reps)
            row(work, "torch.compile", "ns", med, best, first, n)

    # sgemm.
    a, b = torch.randn(SGEMM_N, SGEMM_N), torch.randn(SGEMM_N, SGEMM_N)
    flop = 2.0 * SGEMM_N ** 3
    with torch.inference_mode():
        med, best, n = measure(lambda: torch.mm(a, b), min_time, reps)
    row("sgemm_2048", "eager torch.mm", "GFLOP/s", flop / med, flop / best, samples=n)
    a, b = a.to(torch.bfloat16), b.to(torch.bfloat16)
    with torch.inference_mode():
        med, best, n = measure(lambda: torch.mm(a, b), min_time, reps)
    row("bgemm_2048", "eager torch.mm (bf16)", "GFLOP/s", flop / med, flop / best, samples=n)

    # Cached call on 64 elements.
    x64 = torch.randn(CHAIN_NUMEL)
    med, best, n = measure(lambda: chain(x64), min_time, reps)
    row("cached_call_64", "eager", "ns", med, best, samples=n)
    c = compiled(chain)
    first, _ = timed_first(lambda: c(x64))
    med, best, n = measure(lambda: c(x64), min_time, reps)
    row("cached_call_64", "torch.compile", "ns", med, best, first, n)

    # Train step, eager and with the model compiled.
    step = make_train_step()
    first, _ = timed_first(step)
    med, best, n = measure(step, min_time, reps)
    row("train_step_mlp", "eager", "ns", med, best, first, n)
    torch._dynamo.reset()
    step = make_train_step(compile_model=True)
    first, _ = timed_first(step)
    med, best, n = measure(step, min_time, reps)
    row("train_step_mlp", "torch.compile (model)", "ns", med, best, first, n)

    # GPT-2 block forward + backward.
    xb, causal, params = gpt2_block_inputs()
    leaves = [xb, *params]

    def fwd_bwd(loss_fn):
        def go():
            for p in leaves:
                p.grad = None
            loss = loss_fn(xb, causal, *params)
            loss.backward()
            return loss
        return go

    eager_step = fwd_bwd(gpt2_block_loss)
    first, _ = timed_first(eager_step)
    med, best, n = measure(eager_step, min_time, reps)
    row("gpt2_block", "eager", "ns", med, best, first, n)
    compiled_step = fwd_bwd(compiled(gpt2_block_loss))
    first, _ = timed_first(compiled_step)
    med, best, n = measure(compiled_step, min_time, reps)
    row("gpt2_block", "torch.compile", "ns", med, best, first, n)
    written_out = fwd_bwd(gpt2_block_loss_written_out)
    first, _ = timed_first(written_out)
    med, best, n = measure(written_out, min_time, reps)
    row("gpt2_block", "eager, attention written out", "ns", med, best, first, n)

    # bf16 MLP layer forward + backward (thunder_benches::mlp_bf16_loss, MLP_BF16's shapes).
    rows_, width, hidden = 512, 768, 3072
    mlp_leaves = [
        (torch.randn(*shape) * scale).to(torch.bfloat16).requires_grad_(True)
        for shape, scale in [((rows_, width), 1.0), ((hidden, width), 0.05), ((hidden,), 0.05),
                             ((width, hidden), 0.05), ((width,), 0.05)]
    ]

    def mlp_bf16_loss(x, w1, b1, w2, b2):
        h = torch.nn.functional.gelu(torch.nn.functional.linear(x, w1, b1), approximate="tanh")
        return torch.nn.functional.linear(h, w2, b2).mean()

    def mlp_step(loss_fn):
        def go():
            for p in mlp_leaves:
                p.grad = None
            loss = loss_fn(*mlp_leaves)
            loss.backward()
            return loss
        return go

    for variant, fn in [("eager", mlp_bf16_loss), ("torch.compile", compiled(mlp_bf16_loss))]:
        step = mlp_step(fn)
        first, _ = timed_first(step)
        med, best, n = measure(step, min_time, reps)
        row("mlp_bf16_layer", variant, "ns", med, best, first, n)
    return rows


def compare_issue7(rows: list[dict], bench_path: Path) -> None:
    """Prints thunder's numbers from `thunder bench --json` next to the torch rows."""
    bench = json.loads(bench_path.read_text())
    results = {r["name"]: r for r in bench["results"]}
    scale = {"ms": 1e6, "us": 1e3, "ns": 1.0}
    copy = results.get("copy_64mb")
    floor_ns = copy["value"] * scale[copy["unit"]] if copy else None
    print()
    print(f"thunder bench ({bench_path}): executors {', '.join(bench.get('executors', []))}; "
          f"{bench['machine'].get('cpu')} ({bench['machine'].get('threads')} threads; "
          f"{' '.join(bench['machine'].get('isa', []))})")
    if floor_ns:
        print(f"copy floor (thunder, best of 1 and all threads): {fmt_ns(floor_ns)}")
    print(f"  {'work':<22} {'torch':<28} {'torch':>12} {'thunder':>12} {'thunder/torch':>14} "
          f"{'torch/floor':>12} {'thunder/floor':>14}")
    thunder_names = {"train_step_mlp": ["train_step_mlp", "train_step_mlp_fused"]}
    for r in rows:
        for name in thunder_names.get(r["work"], [r["work"]]):
            t = results.get(name)
            if t is None:
                print(f"  {r['work']:<22} {r['variant']:<28} (no thunder result {name})")
                continue
            label = r["variant"] if name == r["work"] else f"{r['variant']} vs {name.split('_')[-1]}"
            if r["unit"] == "GFLOP/s":
                print(f"  {r['work']:<22} {label:<28} {r['median']:>7.2f} GF/s {t['value']:>7.2f} GF/s "
                      f"{t['value'] / r['median']:>13.3f}x (rate; above 1: thunder faster)")
                continue
            t_ns = t["value"] * scale[t["unit"]]
            # thunder's copy floor is its best sample: compare it with torch's best.
            torch_ns = r["best"] if r["work"] == "copy_64mb" else r["median"]
            if r["work"] == "copy_64mb":
                label = f"{r['variant']} (best)"
            vs_floor = ""
            if floor_ns and r["work"] in ("chain8_16m", "tanh4_16m", "copy_64mb"):
                vs_floor = f"{torch_ns / floor_ns:>12.2f} {t_ns / floor_ns:>14.2f}"
            print(f"  {r['work']:<22} {label:<28} {fmt_ns(torch_ns):>12} {fmt_ns(t_ns):>12} "
                  f"{t_ns / torch_ns:>13.3f}x {vs_floor}")
            if r["first_call_ns"] is not None and t.get("first_call_ms") is not None:
                tf = t["first_call_ms"] * 1e6
                print(f"  {'':<22} {'  first call':<28} {fmt_ns(r['first_call_ns']):>12} {fmt_ns(tf):>12} "
                      f"{tf / r['first_call_ns']:>13.3f}x")


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


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--iters", type=int, default=20000, help="calls per timed loop (default 20000)")
    ap.add_argument("--repeats", type=int, default=10, help="timed loops (default 10)")
    ap.add_argument("--warmup", type=int, default=2000, help="untimed calls first (default 2000)")
    ap.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (default 1)")
    ap.add_argument("--no-compile-time", action="store_true", help="skip the first-call compile timings")
    ap.add_argument("--sections", default="cached,train",
                    help="comma-separated sections to run: cached, train, issue7 (default cached,train)")
    ap.add_argument("--issue7-threads", type=int, default=0,
                    help="torch threads for section issue7 (default 0: every CPU this process may use)")
    ap.add_argument("--issue7-min-time", type=float, default=0.3,
                    help="seconds of samples per issue7 row (default 0.3, as thunder bench)")
    ap.add_argument("--issue7-reps", type=int, default=None,
                    help="exact samples per issue7 row (default: as many as fit in --issue7-min-time, >= 3)")
    ap.add_argument("--thunder-bench", action="append", default=[], type=Path, metavar="FILE",
                    help="output of `thunder bench --json` to compare section issue7 with (repeatable, "
                         "e.g. one file per executor configuration)")
    ap.add_argument("--train-iters", type=int, default=200, help="train steps per timed loop (default 200)")
    ap.add_argument("--train-warmup", type=int, default=50, help="untimed train steps first (default 50)")
    ap.add_argument("--thunder-json", action="append", default=[], type=Path, metavar="FILE",
                    help="criterion estimates.json to compare with (repeatable)")
    args = ap.parse_args()
    sections = {s.strip() for s in args.sections.split(",") if s.strip()}
    known = {"cached", "train", "issue7"}
    if not sections <= known:
        ap.error(f"unknown section(s) {sorted(sections - known)}; pick from cached, train, issue7")
    if args.thunder_bench and "issue7" not in sections:
        ap.error("--thunder-bench compares with section issue7: add it to --sections")

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

    if "issue7" in sections:
        print()
        print("issue7: thunder bench workloads in PyTorch")
        issue7_rows = run_issue7(args)
        torch.set_num_threads(args.threads)
        for path in args.thunder_bench:
            compare_issue7(issue7_rows, path)

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
