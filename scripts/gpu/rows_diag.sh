#!/usr/bin/env bash
# Issue 17 row-kernel diagnostics on the device: the row table (rows_peer.py), the GPT-2 block
# peer, and an ncu list of the block's cuda-fuser kernels (duration, grid, block, DRAM bytes).
#   bash scripts/gpu/rows_diag.sh BIN_DIR [rows|block|ncu ...]
set -uo pipefail
bin="$(cd "${1:?BIN}" && pwd)"; shift
what="${*:-rows block ncu}"
here="$(cd "$(dirname "$0")" && pwd)"
out="${OUT:-gpu-out}"; mkdir -p "$out"
tag="$(basename "$bin")"
source "$here/cuda_libs.sh"
cfg="$out/plugins-$tag.toml"
bash "$here/gpu_config.sh" "$bin" "/tmp/kc-$tag" > "$cfg"
for w in $what; do case $w in
rows) timeout 200 python3 "$here/rows_peer.py" --bin "$bin" --config "$cfg" --json "$out/rows_$tag.json" ${ROWS_ONLY:+--only $ROWS_ONLY} 2>&1 | tee "$out/rows_$tag.txt" ;;
block) DTYPES=bf16 timeout 150 bash "$here/gpt2_peer.sh" "$bin" 2>&1 | tee "$out/block_$tag.txt" ;;
ncu)
  HERE="$here" python3 -c "
import sys; sys.path.insert(0, '$here'); import gpt2_block_peer as g
t, s = g.program(8, 1024, 768, 12); open('/tmp/gpt2_block.py', 'w').write(t)
print(' '.join('-i %s=randn:bf16[%s]' % (n, ','.join(map(str, v))) for n, v in s.items()))" > /tmp/gpt2_args
  timeout 120 ncu --metrics gpu__time_duration.sum,launch__grid_size,launch__block_size,dram__bytes.sum --csv \
    --launch-count 60 -k regex:thunder_fused "$bin/thunder" --config "$cfg" bench /tmp/gpt2_block.py \
    --device cuda:0 --grad --reps 1 $(cat /tmp/gpt2_args) > "$out/ncu_$tag.csv" 2> "$out/ncu_$tag.err"
  echo "ncu rc=$?"; tail -3 "$out/ncu_$tag.err"
  python3 - "$out/ncu_$tag.csv" <<'PY'
import csv, sys, collections
rows = [r for r in csv.reader(l for l in open(sys.argv[1]) if l.startswith('"'))]
if not rows: sys.exit(print("no ncu rows"))
h = rows[0]; ix = {k: h.index(k) for k in ("ID", "Kernel Name", "Metric Name", "Metric Value")}
k = collections.OrderedDict()
for r in rows[1:]:
    d = k.setdefault(r[ix["ID"]], {"name": r[ix["Kernel Name"]]})
    d[r[ix["Metric Name"]]] = r[ix["Metric Value"]]
print("ncu: cuda-fuser kernels of the first call, in launch order")
for i, d in k.items():
    print(f"  #{i:>3} {d['name'][:24]:24} {d.get('gpu__time_duration.sum')} ns grid {d.get('launch__grid_size')} block {d.get('launch__block_size')} dram {d.get('dram__bytes.sum')}")
PY
  ;;
esac; done
