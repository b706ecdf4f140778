"""PyTorch's rate on the GPT-2 block's twelve products (the shapes and operand layouts of
cpu-simd's `block_gemm_bench`, tests/gemm_run.rs), on one thread and on --threads, medians
of 7 timed loops, to set beside that bench's lines.

    python benches/peer/block_gemm_torch.py [--threads 2]
"""

import argparse
import time

import torch

SHAPES = [  # (m, k, n, a transposed, b transposed), as block_gemm_bench
    (256, 256, 1024, False, True),
    (256, 1024, 256, False, True),
    (1024, 256, 256, True, False),
    (256, 256, 1024, False, False),
    (256, 1024, 256, False, False),
    (256, 256, 768, False, True),
    (768, 256, 256, True, False),
    (256, 768, 256, False, False),
    (256, 256, 256, False, False),
]


def rate(m, k, n, ta, tb):
    a = torch.rand(k, m).t() if ta else torch.rand(m, k)
    b = torch.rand(n, k).t() if tb else torch.rand(k, n)
    out = torch.empty(m, n)
    reps = max(1, int(2e9 / (2 * m * n * k)))
    rates = []
    for _ in range(7):
        t = time.perf_counter()
        for _ in range(reps):
            torch.mm(a, b, out=out)
        rates.append(2 * m * n * k * reps / (time.perf_counter() - t) / 1e9)
    return sorted(rates)[3]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args()
    print(f"torch {torch.__version__}")
    for m, k, n, ta, tb in SHAPES:
        torch.set_num_threads(1)
        one = rate(m, k, n, ta, tb)
        torch.set_num_threads(args.threads)
        many = rate(m, k, n, ta, tb)
        print(f"{m}x{k}x{n}{' a^T' if ta else ''}{' b^T' if tb else ''}: "
              f"one thread {one:6.1f}, {args.threads} threads {many:6.1f} GFLOP/s")


if __name__ == "__main__":
    main()
