#!/usr/bin/env bash
# Issue 17 row kernels, one device call: correctness of the new cuda-fuser kernel shapes
# (rows_check.py against the interpreter, opinfo-check of the row/reduction/transpose ops),
# then the GPT-2 block and the row table with the old and new builds in the same run.
#   bash scripts/gpu/rows_final.sh BEFORE_DIR AFTER_DIR
# AFTER's cuda-fuser writes its kernels' sources to $OUT/kernels.tgz (dump_dir).
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
echo "== rows_check (after) =="
timeout "${CHECK_S:-70}" python3 "$here/rows_check.py" --bin "$after" --config /tmp/plugins-after.toml --block 2>&1 | tee "$out/check.txt" || st=1
echo "== opinfo-check (after) =="
timeout "${OPINFO_S:-25}" "$after/thunder" --config /tmp/plugins-after.toml opinfo-check --device cuda:0 --no-grads \
  --only ltorch.softmax,ltorch.log_softmax,ltorch.layer_norm,ltorch.rms_norm,ltorch.cross_entropy,ltorch.mean,ltorch.var,ltorch.sum,ltorch.amax,prims.sum,prims.amax,prims.transpose,ltorch.transpose,ltorch.permute \
  > "$out/opinfo.txt" 2>&1; echo "opinfo rc=$?"; grep -iE "agree|differ|fail|samples" "$out/opinfo.txt" | tail -6
for b in before after; do
  echo "== GPT-2 block, $b =="
  cfg=/tmp/plugins-$b.toml; [ $b = after ] && cfg=/tmp/plugins-after-dump.toml
  bin=$before; [ $b = after ] && bin=$after
  timeout "${BLOCK_S:-50}" python3 "$here/gpt2_block_peer.py" --bin "$bin" --config "$cfg" --dtype bf16 \
    --json "$out/block_$b.json" 2>&1 | tee "$out/block_$b.txt"
done
(cd /tmp && tar czf "$out/kernels.tgz" dump-after 2>/dev/null)
echo "== rows (before / after) =="
timeout "${ROWS_S:-75}" python3 "$here/rows_peer.py" --bin "before=$before:/tmp/plugins-before.toml" \
  --bin "after=$after:/tmp/plugins-after.toml" --json "$out/rows.json" \
  --only "layer_norm bf16 8192x768" "rms_norm bf16 8192x768" "softmax bf16 8192x4096" "softmax f32 16384x4096" \
         "log_softmax bf16 4096x50257" "cross_entropy bf16 4096x50257" "mean bf16" "transpose" \
  --grad-only "layer_norm bf16 8192x768" "softmax bf16 8192x4096" "cross_entropy" 2>&1 | tee "$out/rows.txt"
exit $st
