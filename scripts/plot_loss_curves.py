#!/usr/bin/env python3
"""Plots the loss curves that `scripts/gpu/gpt2_train_peer.py --learn --json FILE` recorded.

    python3 scripts/plot_loss_curves.py curves.json docs/gpt2_loss_curves.png
"""

import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    src, dst = sys.argv[1], sys.argv[2]
    with open(src) as f:
        run = json.load(f)
    fig, ax = plt.subplots(figsize=(7, 4))
    for r in run["results"]:
        if "losses" in r:
            ax.plot(range(1, len(r["losses"]) + 1), r["losses"], label=r["peer"], linewidth=1.2)
    dtype = next((r.get("dtype") for r in run["results"] if "dtype" in r), "")
    ax.set_title(f"byte-level GPT on Shakespeare, {dtype}, {run.get('device', '')}")
    ax.set_xlabel("step")
    ax.set_ylabel("training loss")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(dst, dpi=110)
    print(dst)


if __name__ == "__main__":
    main()
