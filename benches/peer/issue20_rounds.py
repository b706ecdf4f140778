#!/usr/bin/env python3
"""Issue 20's rows, thunder and PyTorch eager alternating, ROUNDS times on the same cores.

On shared or virtual machines the speed moves by 15-30% within minutes, so one run of each
side (`torch_peer.py --sections issue7`) can land thunder in a slow spell and PyTorch in a fast
one or the other way round. Here every round runs `thunder bench --json --only ...` then the
same workloads in PyTorch (eager, `--threads` threads), and the table gives each round's ratio
and the median of the rounds' ratios. No torch.compile (its first calls take minutes).

    python3 benches/peer/issue20_rounds.py --thunder target/release/thunder --rounds 5 --threads 2
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import torch_peer as tp  # noqa: E402

WORK = ["copy_64mb", "tanh4_16m", "sgemm_2048", "train_step_mlp", "gpt2_block"]


def torch_round(min_time: float) -> dict[str, float]:
    """PyTorch eager's median per workload: ns, or GFLOP/s for sgemm."""
    import torch

    out = {}
    x = torch.linspace(-1, 1, tp.BIG_NUMEL)
    with torch.inference_mode():
        out["tanh4_16m"] = tp.measure(lambda: tp.tanh4(x), min_time)[0]
        a, b = torch.randn(tp.SGEMM_N, tp.SGEMM_N), torch.randn(tp.SGEMM_N, tp.SGEMM_N)
        out["sgemm_2048"] = 2.0 * tp.SGEMM_N**3 / tp.measure(lambda: torch.mm(a, b), min_time)[0]
    out["train_step_mlp"] = tp.measure(tp.make_train_step(), min_time)[0]
    xb, causal, params = tp.gpt2_block_inputs()
    leaves = [xb, *params]

    def step():
        for p in leaves:
            p.grad = None
        tp.gpt2_block_loss(xb, causal, *params).backward()

    out["gpt2_block"] = tp.measure(step, min_time)[0]
    return out


def thunder_round(thunder: str, min_time: float) -> dict[str, float]:
    """thunder bench's median per workload: ns, or GFLOP/s for sgemm; the copy floor's best."""
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        cmd = [thunder, "bench", "--json", "--min-time", str(min_time), "--only", ",".join(WORK)]
        subprocess.run(cmd, stdout=f, check=True)
        f.seek(0)
        doc = json.load(f)
    out = {}
    for r in doc["results"]:
        scale = {"ms": 1e6, "us": 1e3, "ns": 1.0}.get(r["unit"])
        if r["name"] == "copy_64mb":
            out["floor"] = r["best"] * scale
        else:
            out[r["name"]] = r["value"] * scale if scale else r["value"]
    out["machine"] = doc.get("machine")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--thunder", default="target/release/thunder", help="the thunder CLI")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2, help="torch threads (set RAYON_NUM_THREADS alike)")
    ap.add_argument("--min-time", type=float, default=1.0, help="seconds of samples per row and side")
    ap.add_argument("--json", type=Path, help="write every round's numbers here")
    args = ap.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    os.environ.setdefault("RAYON_NUM_THREADS", str(args.threads))
    rounds = []
    for r in range(args.rounds):
        th = thunder_round(args.thunder, args.min_time)
        pt = torch_round(args.min_time)
        rounds.append({"thunder": th, "torch": pt})
        print(f"round {r + 1}: " + "  ".join(
            f"{w} {th[w] / pt[w]:.3f}x" if w != "sgemm_2048" else f"{w} {th[w] / pt[w]:.3f}x(rate)"
            for w in WORK[2:]) + f"  tanh4/floor {th['tanh4_16m'] / th['floor']:.2f}", flush=True)
    print(f"machine: {rounds[0]['thunder'].get('machine')}; torch {torch.__version__}, {args.threads} threads")
    print(f"{'work':16s} {'thunder (median of rounds)':>28s} {'torch':>14s}  ratio per round -> median")
    for w in ["tanh4_16m", "sgemm_2048", "train_step_mlp", "gpt2_block"]:
        ths = [x["thunder"][w] for x in rounds]
        pts = [x["torch"][w] for x in rounds]
        ratios = [a / b for a, b in zip(ths, pts)]
        unit, k = ("GFLOP/s", 1.0) if w == "sgemm_2048" else ("ms", 1e-6)
        print(f"{w:16s} {statistics.median(ths) * k:22.3f} {unit:7s} {statistics.median(pts) * k:10.3f}"
              f"  {' '.join(f'{x:.3f}' for x in ratios)} -> {statistics.median(ratios):.3f}x")
    floors = [x["thunder"]["tanh4_16m"] / x["thunder"]["floor"] for x in rounds]
    print(f"tanh4 over the copy floor per round: {' '.join(f'{x:.2f}' for x in floors)} -> "
          f"{statistics.median(floors):.2f}x")
    # The ratio moves with either side: on a shared host the copy floor itself has moved by 2x
    # between sessions (and within one) while tanh4's own time stayed put, so print both.
    for name, key in [("copy floor", "floor"), ("tanh4", "tanh4_16m")]:
        ms = [x["thunder"][key] * 1e-6 for x in rounds]
        print(f"{name} per round (ms): {' '.join(f'{x:.2f}' for x in ms)} -> {statistics.median(ms):.2f}")
    if args.json:
        args.json.write_text(json.dumps(rounds, indent=1))


if __name__ == "__main__":
    main()
