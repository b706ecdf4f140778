#!/usr/bin/env bash
# Issue 17 column reductions, one device call: correctness and time of the cuda-fuser column
# kernels (columns_check.py: examine against the interpreter, f32 against torch, the region's
# time beside eager and the copy floor) with the old and new builds in the same run, then the
# row kernels' check (rows_check.py, which has the layer_norm and GPT-2 block gradients that
# now use the column kernels) and the GPT-2 block.
#   bash scripts/gpu/columns_check.sh BEFORE_DIR AFTER_DIR
# (each DIR holds a release `thunder` and the plugins' .so, as check.sh describes.)
set -uo pipefail
before="$(cd "${1:?BEFORE}" && pwd)"; after="$(cd "${2:?AFTER}" && pwd)"
here="$(cd "$(dirname "$0")" && pwd)"
out="${OUT:-gpu-out}"; mkdir -p "$out"
export PYTHONUNBUFFERED=1
source "$here/cuda_libs.sh"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
bash "$here/gpu_config.sh" "$before" /tmp/kc-before > /tmp/plugins-before.toml
bash "$here/gpu_config.sh" "$after" /tmp/kc-after > /tmp/plugins-after.toml
sed "s|^cache_dir = \"/tmp/kc-after\"|&\ndump_dir = \"/tmp/dump-after\"|" /tmp/plugins-after.toml > /tmp/plugins-after-dump.toml
st=0
echo "== columns (after checked; before / after timed) =="
timeout "${COLUMNS_S:-240}" python3 "$here/columns_check.py" --bin "after=$after:/tmp/plugins-after-dump.toml" \
  --bin "before=$before:/tmp/plugins-before.toml" --json "$out/columns.json" 2>&1 | tee "$out/columns.txt" || st=1
echo "== rows_check (after) =="
timeout "${CHECK_S:-90}" python3 "$here/rows_check.py" --bin "$after" --config /tmp/plugins-after.toml --block 2>&1 | tee "$out/rows_check.txt" || st=1
for b in before after; do
  echo "== GPT-2 block, $b =="
  bin=$before; [ $b = after ] && bin=$after
  timeout "${BLOCK_S:-60}" python3 "$here/gpt2_block_peer.py" --bin "$bin" --config /tmp/plugins-$b.toml --dtype bf16 \
    --json "$out/block_$b.json" 2>&1 | tee "$out/block_$b.txt"
done
(cd /tmp && tar czf "$out/kernels.tgz" dump-after 2>/dev/null)
exit $st
