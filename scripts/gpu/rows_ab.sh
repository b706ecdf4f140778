#!/usr/bin/env bash
# Row kernels (rows_kernels.py) of two builds in one call, alternating NEW OLD NEW OLD (ROUNDS
# rounds), then one table of thunder's forward / backward kernel time per case and build (µs,
# the median over the rounds) and x the floor. Only the cuda-fuser plugin need differ: OLD may
# hold just libthunder_cuda_fuser.so (the rest is taken from NEW). On the device, carry
# [".gpu-bin", ".gpu-old"]:
#   ONLY="bf16" bash scripts/gpu/rows_ab.sh .gpu-bin .gpu-old
set -uo pipefail
new="$(cd "${1:?NEW_DIR}" && pwd)"
old_src="$(cd "${2:?OLD_DIR}" && pwd)"
here="$(dirname "$0")"
out="${OUT:-gpu-out}"
mkdir -p "$out"
old="${TMPDIR:-/tmp}/rows-ab-old"
rm -rf "$old" && mkdir -p "$old"
cp "$new"/* "$old"/ && cp "$old_src"/* "$old"/
for r in $(seq 1 "${ROUNDS:-2}"); do
  for who in new old; do
    dir=$new; [ $who = old ] && dir=$old
    bash "$here/rows_kernels.sh" "$dir" --json "$out/ab_${who}_$r.json" ${ONLY:+--only $ONLY} \
      > "$out/ab_${who}_$r.txt" 2>&1 || echo "$who round $r failed: $(tail -3 "$out/ab_${who}_$r.txt")"
  done
done
python3 - "$out" "${ROUNDS:-2}" <<'PY'
import json, os, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
runs = {}
for who in ("new", "old"):
    for r in range(1, rounds + 1):
        try:
            res = json.load(open(os.path.join(out, f"ab_{who}_{r}.json")))
        except Exception as e:  # noqa: BLE001
            print(f"{who} round {r}: no result ({e.__class__.__name__})")
            continue
        for c in res["cases"]:
            runs.setdefault(c["case"], {}).setdefault(who, []).append(c)
print(f"{'case':30} {'new fwd|bwd us':>16} {'old fwd|bwd us':>16}   x floor new | old   torch x floor")
for case, by in runs.items():
    cells, ratios = [], []
    for who in ("new", "old"):
        cs = by.get(who, [])
        f = statistics.median(c["thunder"]["fwd_us"] for c in cs) if cs else float("nan")
        b = statistics.median(c["thunder"]["bwd_us"] for c in cs) if cs else float("nan")
        cells.append(f"{f:7.1f}|{b:7.1f}")
        if cs:
            ratios.append(f"{f / cs[0]['floor_us']:.2f}/{b / cs[0]['bwd_floor_us']:.2f}")
    t = by.get("new", [{}])[0].get("torch", {})
    tr = ""
    if t and by.get("new"):
        c0 = by["new"][0]
        tr = f"{t.get('fwd_us', float('nan')) / c0['floor_us']:.2f}/{t.get('bwd_us', float('nan')) / c0['bwd_floor_us']:.2f}"
    print(f"{case[:30]:30} {cells[0]:>16} {cells[1]:>16}   {' | '.join(ratios):22} {tr}")
PY
