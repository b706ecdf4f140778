#!/usr/bin/env bash
# The row layout's tuning (THUNDER_CUDA_FUSER_ROWS, see executors/cuda-fuser/src/row_vector.rs)
# swept over rows_kernels.py's cases, one process per setting, then one table of thunder's
# forward / backward kernel time per case and setting (µs). On the device, carry [".gpu-bin"]:
#   bash scripts/gpu/rows_sweep.sh .gpu-bin "" "vectors=2" "warp_rows=0" ...
# ("" is the built-in tuning). Each setting's JSON goes to $OUT (default gpu-out).
set -uo pipefail
bin="${1:-.gpu-bin}"
shift || true
here="$(dirname "$0")"
out="${OUT:-gpu-out}"
mkdir -p "$out"
names=()
for setting in "$@"; do
  name="${setting:-default}"
  name="${name//[=,]/_}"
  names+=("$name")
  THUNDER_CUDA_FUSER_ROWS="$setting" bash "$here/rows_kernels.sh" "$bin" --json "$out/sweep_$name.json" \
    ${ONLY:+--only $ONLY} > "$out/sweep_$name.txt" 2>&1 || echo "setting '$setting' failed: $(tail -3 "$out/sweep_$name.txt")"
done
python3 - "$out" "${names[@]}" <<'PY'
import json, os, sys
out, names = sys.argv[1], sys.argv[2:]
runs = {}
for n in names:
    try:
        runs[n] = {c["case"]: c for c in json.load(open(os.path.join(out, f"sweep_{n}.json")))["cases"]}
    except Exception as e:  # noqa: BLE001
        print(f"{n}: no result ({e.__class__.__name__})")
cases = list(next(iter(runs.values())).keys()) if runs else []
print(f"{'case (fwd | bwd us)':30}" + "".join(f" {n[:15]:>15}" for n in runs))
for c in cases:
    cells = []
    for n, r in runs.items():
        t = r.get(c, {}).get("thunder", {})
        cells.append(f"{t.get('fwd_us', float('nan')):6.1f}|{t.get('bwd_us', float('nan')):7.1f}")
    print(f"{c[:30]:30}" + "".join(f" {x:>15}" for x in cells))
PY
