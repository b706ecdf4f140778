#!/usr/bin/env python3
"""Sums a `THUNDER_CPU_SIMD_TRACE=1` log (cpu-simd's per-stage stderr lines) per call of a
forward + backward program: time by stage kind (fused loops, GEMMs, attention, convolutions,
pads...), the regions' time outside their stages, the most expensive GEMMs and fused loops,
and how many lines name a T x T shape (`--tt 128` looks for `128, 128]`).

    THUNDER_CPU_SIMD_TRACE=1 ./target/release/thunder bench --only gpt2_block --reps 10 \\
        2> /tmp/trace.txt >/dev/null
    python3 scripts/cpu_simd_trace_summary.py /tmp/trace.txt --tt 128
"""
import argparse
import collections
import re


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("log")
    ap.add_argument("--regions-per-call", type=int, default=2,
                    help="cpu-simd regions one call runs (default 2: forward and backward)")
    ap.add_argument("--tt", type=int, default=None, help="count lines with a [..., T, T] shape")
    ap.add_argument("--top", type=int, default=8)
    a = ap.parse_args()
    lines = open(a.log).read().splitlines()
    regions = [l for l in lines if l.startswith("cpu-simd region:")]
    calls = max(len(regions) / a.regions_per_call, 1)
    total = sum(float(re.search(r"([\d.]+) us", l).group(1)) for l in regions)
    kinds, counts = collections.Counter(), collections.Counter()
    gemms, groups = collections.Counter(), collections.Counter()
    for l in lines:
        m = re.match(
            r"cpu-simd (gemm pair|gemm|group|attn bwd|attn|conv|max pool|pad|layer_norm)"
            r":\s+([\d.]+) us(.*)", l)
        if not m:
            continue
        kind, us, rest = m.group(1), float(m.group(2)), m.group(3).strip()
        kinds[kind] += us
        counts[kind] += 1
        if kind in ("gemm", "gemm pair"):
            gemms[("pair: " if kind == "gemm pair" else "") + rest] += us
        elif kind == "group":
            g = re.match(r"shape (\[[^\]]*\]).* ins (\d+) par (\w+)", rest)
            if g:
                groups[f"shape {g.group(1)} ins {g.group(2)} par {g.group(3)}"] += us
    print(f"{calls:.0f} calls; per call: regions {total / calls / 1e3:.2f} ms")
    for k, us in kinds.most_common():
        print(f"  {k:<10} {us / calls / 1e3:7.2f} ms  ({counts[k] / calls:.0f} stages)  "
              f"{100 * us / max(total, 1e-9):5.1f}%")
    # Scratch allocation, the hand-off to a worker, and whatever runs between stages (the
    # trace's own writing included): large values mean time the stages do not account for.
    outside = total - sum(kinds.values())
    print(f"  {'outside stages':<10} {outside / calls / 1e3:7.2f} ms  "
          f"{100 * outside / max(total, 1e-9):5.1f}%")
    for title, table in (("GEMMs", gemms), ("fused loops", groups)):
        print(f"most expensive {title} per call:")
        for key, us in table.most_common(a.top):
            print(f"  {us / calls / 1e3:6.3f} ms  {key}")
    if a.tt:
        print(f"lines naming a [..., {a.tt}, {a.tt}] shape: "
              f"{sum(1 for l in lines if f'{a.tt}, {a.tt}]' in l)}")


if __name__ == "__main__":
    main()
