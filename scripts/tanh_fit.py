#!/usr/bin/env python3
"""Fit the rational function behind cpu-simd's f32 tanh (``executors/cpu-simd/src/math.rs``).

    python scripts/tanh_fit.py [M N X]      # defaults: 4 4 8.0; about two minutes

tanh(x) / x is approximated by P(s) / Q(s) in s = x^2 for x in [0, X], P of degree M and Q of
degree N, both with constant term 1 (so tanh(x) = x exactly for tiny x), minimising the
largest relative error. Method: Sanathanan-Koerner iteration (solve the linearised least
squares problem weighted by the previous denominator) with Lawson's reweighting towards the
minimax solution, in mpmath at 40 digits, on a grid dense near X where tanh saturates.

Prints the largest relative error in ulps of 1 (2^-24) and the coefficients from the highest
degree down, as `math.rs` lists them. The f32 coefficients in `math.rs` are these rounded to
f32, then moved by an ulp or two each while that lowered the worst error of the f32
evaluation (fused multiply-adds, every f32 of [0.25, 8] against f64 tanh); the exhaustive
test `tanh_exhaustive` checks the result.

Needs mpmath (a dependency of sympy, which torch installs).
"""

import sys

import mpmath as mp

mp.mp.dps = 40


def fit(m, n, x_max, iters=60, points=3000):
    grid = {mp.mpf(x_max) * mp.sin(mp.pi / 2 * i / points) for i in range(1, points + 1)}
    grid |= {mp.mpf(x_max) * i / points for i in range(1, points + 1)}
    xs = sorted(grid)
    scale = mp.mpf(x_max) ** 2
    us = [x * x / scale for x in xs]  # s / X^2, in (0, 1], for conditioning
    fs = [mp.tanh(x) / x for x in xs]
    weights = [mp.mpf(1)] * len(xs)
    q_prev = [mp.mpf(1)] * len(xs)
    best = None
    for _ in range(iters):
        # Unknowns a_1..a_m, b_1..b_n of P = 1 + sum a_k u^k, Q = 1 + sum b_k u^k:
        # (P - f Q) / (f Q_prev) = 0, i.e. sum a_k u^k - f sum b_k u^k = f - 1, weighted.
        rows, rhs = [], []
        for u, f, q, w in zip(us, fs, q_prev, weights):
            k = mp.sqrt(w) / (f * q)
            rows.append([u**j * k for j in range(1, m + 1)] + [-f * u**j * k for j in range(1, n + 1)])
            rhs.append((f - 1) * k)
        sol = mp.qr_solve(mp.matrix(rows), mp.matrix(rhs))[0]
        a = [mp.mpf(1)] + [sol[j] for j in range(m)]
        b = [mp.mpf(1)] + [sol[m + j] for j in range(n)]
        p_vals = [mp.polyval(a[::-1], u) for u in us]
        q_vals = [mp.polyval(b[::-1], u) for u in us]
        err = [(p / q - f) / f for p, q, f in zip(p_vals, q_vals, fs)]
        worst = max(abs(e) for e in err)
        if best is None or worst < best[0]:
            best = (worst, a, b)
        q_prev = q_vals
        weights = [w * abs(e) for w, e in zip(weights, err)]
        total = sum(weights)
        weights = [w / total for w in weights]
    worst, a, b = best
    # Back to monomials in s: the coefficient of s^k is a_k / X^(2k).
    p = [a[k] / scale**k for k in range(m + 1)]
    q = [b[k] / scale**k for k in range(n + 1)]
    return worst, p, q


def main():
    m, n, x_max = (int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])) if len(sys.argv) > 3 else (4, 4, 8.0)
    worst, p, q = fit(m, n, x_max)
    print(f"({m}, {n}) on [0, {x_max}]: largest relative error {float(worst):.3e} = {float(worst) / 2**-24:.3f} ulp")
    print("P (highest degree first):", ", ".join(mp.nstr(c, 17) for c in p[::-1]))
    print("Q (highest degree first):", ", ".join(mp.nstr(c, 17) for c in q[::-1]))


if __name__ == "__main__":
    main()
