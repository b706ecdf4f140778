#!/usr/bin/env python3
"""Replays, in numpy f32, the summation order of cuda-fuser's sum over rows of 300,001 f32
(the old kernel: one block of 1024 threads a row; the split one: 18 blocks a row, 4-wide
vectors after a peeled head, partials combined by the last block) and prints each one's error
against the f64 sum, with `thunder examine`'s f32 tolerance (1e-5 + 1.3e-6 |ref|).

On an H200 the split kernel differed from the interpreter by 1.421e-4 on row 0; this replay
gives 1.42e-4 for the split order (and 1.80e-4 for the old one): the GPU sums in exactly the
intended order, and no f32 order meets that tolerance on this row (its sum cancels to 4.29).

    thunder run p.py --out . -i x=randn:f32[4,300001]   # p.py returns ltorch.mul(x, 1.0)
    python3 scripts/gpu/split_sum_rounding.py out_0.npy
"""
import sys

import numpy as np

f32 = np.float32


def warp_tree(v):
    """__shfl_xor_sync butterfly over 32 lanes; every lane ends with lane 0's value."""
    v = v.copy()
    for o in (16, 8, 4, 2, 1):
        v = (v + v[np.arange(32) ^ o]).astype(f32)
    return v[0]


def block_reduce(vals):
    """codegen's block_reduce: warp trees, then a tree over the warps' results."""
    warps = (len(vals) + 31) // 32
    vals = np.concatenate([vals, np.zeros(warps * 32 - len(vals), f32)])
    s = np.array([warp_tree(vals[w * 32:(w + 1) * 32]) for w in range(warps)], f32)
    return warp_tree(np.concatenate([s, np.zeros(32 - warps, f32)]))


def old_row(row, block=1024):
    n = (len(row) + block - 1) // block
    m = np.zeros(n * block, f32)
    m[:len(row)] = row
    acc = np.zeros(block, f32)
    for part in m.reshape(n, block):
        acc = (acc + part).astype(f32)
    return block_reduce(acc)


def split_row(r, row, block=1024, splits=18, width=4):
    cols, team = len(row), block * splits
    head = min(cols, (width - (r * cols) % width) % width)
    body_end = head + (cols - head) // width * width
    acc = np.zeros(team, f32)
    for c in range(head):
        acc[c] = f32(acc[c] + row[c])
    vec = row[head:body_end].reshape(-1, width)
    for k in range(0, len(vec), team):
        idx = np.arange(team) + k
        ok = idx < len(vec)
        for j in range(width):
            v = np.zeros(team, f32)
            v[ok] = vec[idx[ok], j]
            acc = (acc + v).astype(f32)
    for c in range(body_end, cols):
        acc[c - body_end] = f32(acc[c - body_end] + row[c])
    parts = np.zeros(block, f32)
    parts[:splits] = [block_reduce(acc[p * block:(p + 1) * block]) for p in range(splits)]
    return block_reduce(parts)


def main():
    x = np.load(sys.argv[1] if len(sys.argv) > 1 else "out_0.npy")
    for r in range(x.shape[0]):
        ref = x[r].astype(np.float64).sum()
        tol = 1e-5 + 1.3e-6 * abs(ref)
        o, s = abs(old_row(x[r]) - ref), abs(split_row(r, x[r]) - ref)
        print(f"row {r}: sum {ref:11.4f}  one block {o:.2e}  split {s:.2e}  tolerance {tol:.1e}")


if __name__ == "__main__":
    main()
