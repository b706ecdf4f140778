#!/usr/bin/env python3
"""Where the host time of one GPT-2 training step goes (issue 17): per peer, the host time of
each phase of the step (forward call, backward, AdamW, zero_grad) without synchronizing, then a
torch.profiler trace of a few steps: how busy the GPU was, its idle gaps, and the host calls
that took the most time (driver calls such as cuStreamSynchronize and cuLaunchKernel included).

    python3 scripts/gpu/step_profile.py [--peers thunder,eager] [--config small] [--steps 3]

STEP_PROFILE_KERNELS=N lists the N costliest kernels (default 25). Each peer runs in its own
process (as gpt2_train_peer.py does); THUNDER_CONFIG should name a
plugins.toml with the CUDA executors (gpu_config.sh).
"""

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("gpt2_train_peer", os.path.join(HERE, "gpt2_train_peer.py"))
peer_mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(peer_mod)


def phases(a):
    dev = "cuda:0"
    model = peer_mod.make(a.config, a.dtype, dev)
    fn = peer_mod.wrap(model, a.peer)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)
    g = torch.Generator().manual_seed(1)
    vocab = peer_mod.CONFIGS[a.config]["vocab"]
    idx = torch.randint(0, vocab, (a.batch, a.seq), generator=g).to(dev)
    tgt = torch.randint(0, vocab, (a.batch, a.seq), generator=g).to(dev)
    marks = {}

    def step(record=None):
        t = [time.perf_counter()]
        loss = fn(idx, tgt)
        t.append(time.perf_counter())
        loss.backward()
        t.append(time.perf_counter())
        opt.step()
        t.append(time.perf_counter())
        opt.zero_grad(set_to_none=True)
        t.append(time.perf_counter())
        if record is not None:
            for name, a0, a1 in zip(("forward", "backward", "adamw", "zero_grad"), t, t[1:]):
                record.setdefault(name, []).append((a1 - a0) * 1e3)
        return loss

    for _ in range(4):
        step()
    torch.cuda.synchronize()
    # Host time per phase with the GPU left to run behind (no synchronization inside a step).
    for _ in range(a.reps):
        step(marks)
    torch.cuda.synchronize()
    # Host time per phase when each step starts on an idle GPU.
    idle = {}
    for _ in range(a.reps):
        torch.cuda.synchronize()
        step(idle)
    torch.cuda.synchronize()
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        t0 = time.perf_counter()
        for _ in range(a.steps):
            step()
        torch.cuda.synchronize()
        wall = (time.perf_counter() - t0) * 1e3 / a.steps
    regions = region_profile(fn, idx, tgt) if a.peer == "thunder" else None
    kernels = []
    host = {}
    for e in prof.events():
        dt = str(getattr(e, "device_type", ""))
        if dt.endswith("CUDA"):
            start = e.time_range.start
            kernels.append((start, start + e.time_range.elapsed_us(), e.name))
        else:
            h = host.setdefault(e.name, [0, 0.0])
            h[0] += 1
            h[1] += e.self_cpu_time_total
    kernels.sort()
    busy, last_end, gaps = 0.0, None, []
    for s, e, _ in kernels:
        if last_end is None or s >= last_end:
            busy += e - s
            if last_end is not None:
                gaps.append(s - last_end)
            last_end = e
        elif e > last_end:
            busy += e - last_end
            last_end = e
    span = (kernels[-1][1] - kernels[0][0]) if kernels else 0.0
    by_kernel = {}
    for s, e, n in kernels:
        k = by_kernel.setdefault(n, [0, 0.0])
        k[0] += 1
        k[1] += e - s
    top_host = sorted(host.items(), key=lambda kv: -kv[1][1])[:25]
    top_kernels = sorted(by_kernel.items(), key=lambda kv: -kv[1][1])[: int(os.environ.get("STEP_PROFILE_KERNELS", "25"))]
    big_gaps = sorted(gaps, reverse=True)[:10]
    return dict(
        peer=a.peer,
        host_ms_per_phase={k: statistics.median(v) for k, v in marks.items()},
        host_ms_per_phase_from_idle={k: statistics.median(v) for k, v in idle.items()},
        profiled_wall_ms_per_step=wall,
        gpu_kernels_per_step=len(kernels) / a.steps,
        gpu_busy_ms_per_step=busy / 1e3 / a.steps,
        gpu_span_ms_per_step=span / 1e3 / a.steps,
        gpu_gaps_over_20us_per_step=sum(1 for g in gaps if g > 20) / a.steps,
        gpu_gap_ms_per_step=sum(gaps) / 1e3 / a.steps,
        largest_gaps_us=big_gaps,
        top_host_self_ms_per_step=[(n, c / a.steps, t / 1e3 / a.steps) for n, (c, t) in top_host],
        top_kernels_ms_per_step=[(n[:90], c / a.steps, t / 1e3 / a.steps) for n, (c, t) in top_kernels],
        regions=regions,
    )


def region_profile(fn, idx, tgt, reps=5):
    """thunder's forward and backward region by region: the host's cost of each region call
    (not waiting for the GPU) and, waiting after each, its host + GPU time; medians of `reps`
    runs, summed per executor, and the costliest regions."""
    from torch._C import _to_dlpack

    entry = fn._last
    dump = os.environ.get("STEP_PROFILE_TRACES")
    if dump:  # every trace of the program, the execution traces last of each side
        with open(dump, "w") as f:
            f.write("\n\n#####\n\n".join(entry.program.traces()))
    tensors = [idx, tgt] + [t for _, t in fn._named_inputs()] + list(entry.captured)
    caps = lambda: [_to_dlpack(t.detach().contiguous()) for t in tensors]  # noqa: E731
    stream = torch.cuda.current_stream().cuda_stream
    out = {}
    for side in ("forward", "backward"):
        for wait in (False, True):
            runs = []
            for _ in range(reps):
                torch.cuda.synchronize()
                if side == "forward":
                    runs.append(entry.program.profile_forward(caps(), wait))
                else:
                    outs, saved = entry.program.forward(caps(), stream)
                    loss = torch._C._from_dlpack(outs[0])
                    cot = [_to_dlpack(torch.ones_like(loss))]
                    torch.cuda.synchronize()
                    runs.append(entry.program.profile_backward(saved, cot, wait))
            torch.cuda.synchronize()
            per = [statistics.median(r[k][2] for r in runs) * 1e6 for k in range(len(runs[0]))]
            by_exec = {}
            for (ex, _, _), us in zip(runs[0], per):
                e = by_exec.setdefault(ex, [0, 0.0])
                e[0] += 1
                e[1] += us
            top = sorted(zip(per, runs[0]), key=lambda x: -x[0])[:15]
            out[f"{side}_{'wait' if wait else 'host'}"] = dict(
                total_us=sum(per),
                by_executor={k: (c, us) for k, (c, us) in by_exec.items()},
                top=[(us, ex, region) for us, (ex, region, _) in top],
            )
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--peers", default="thunder,eager")
    ap.add_argument("--config", default="small")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--dtype", default="bf16")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--json")
    ap.add_argument("--peer", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.peer:
        print("RESULT " + json.dumps(phases(a)), flush=True)
        return
    results = []
    for peer in a.peers.split(","):
        cmd = [sys.executable, __file__, "--peer", peer, "--config", a.config, "--batch", str(a.batch),
               "--seq", str(a.seq), "--dtype", a.dtype, "--reps", str(a.reps), "--steps", str(a.steps)]
        env = dict(os.environ)
        if peer == "thunder-nographs":  # thunder with CUDA-graph replay off
            env["THUNDER_CUDA_GRAPHS"] = "0"
        p = subprocess.run(cmd, capture_output=True, text=True, env=env)
        r = next((json.loads(l[7:]) for l in p.stdout.splitlines() if l.startswith("RESULT ")), None)
        if r is None:
            print(f"# {peer} failed (rc {p.returncode}):\n{(p.stdout + p.stderr)[-3000:]}")
            continue
        results.append(r)
        print(f"\n== {peer}")
        print("host ms per phase, GPU behind:   " + ", ".join(f"{k} {v:.2f}" for k, v in r["host_ms_per_phase"].items()))
        print("host ms per phase, from idle:    " + ", ".join(f"{k} {v:.2f}" for k, v in r["host_ms_per_phase_from_idle"].items()))
        print(f"profiled step {r['profiled_wall_ms_per_step']:.2f} ms: GPU busy {r['gpu_busy_ms_per_step']:.2f} ms, "
              f"span {r['gpu_span_ms_per_step']:.2f}, {r['gpu_kernels_per_step']:.0f} kernels, "
              f"gaps {r['gpu_gap_ms_per_step']:.2f} ms ({r['gpu_gaps_over_20us_per_step']:.0f} over 20 us); "
              f"largest gaps us: {', '.join(f'{g:.0f}' for g in r['largest_gaps_us'])}")
        print("host calls by self time per step (count, ms):")
        for n, c, t in r["top_host_self_ms_per_step"]:
            print(f"  {t:8.3f} ms {c:7.1f}x  {n[:100]}")
        for key, v in (r.get("regions") or {}).items():
            print(f"regions, {key}: {v['total_us'] / 1e3:.2f} ms; by executor (regions, ms): "
                  + ", ".join(f"{ex} {c} {us / 1e3:.2f}" for ex, (c, us) in v["by_executor"].items()))
            print("  costliest: " + ", ".join(f"{ex}#{reg} {us:.0f}us" for us, ex, reg in v["top"]))
        print("kernels by time per step (count, ms):")
        for n, c, t in r["top_kernels_ms_per_step"]:
            print(f"  {t:8.3f} ms {c:7.1f}x  {n}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
