#!/usr/bin/env bash
# Issue 17 row kernels and backward regions, one device call:
#   1. rows_check.py: every row-kernel shape (softmax, log_softmax, layer_norm, rms_norm,
#      cross_entropy, forward and gradients; f32/f16/bf16; rows of 768 to 50,257, odd lengths)
#      and the GPT-2 block's layer_norm-backward and split-gradient regions on cuda:0 against
#      the interpreter: one PASS/FAIL line per case;
#   2. rows_peer.py: each row kernel's forward and backward time beside the copy floor and
#      PyTorch eager (and a BEFORE build's, when given), in the same run;
#   3. gpt2_block_peer.py: the GPT-2 block fwd+bwd bf16 B8 T1024, per region.
#   bash scripts/gpu/rows_check.sh BIN_DIR [BEFORE_DIR]
# (each DIR holds a release `thunder` and the plugins' .so, as check.sh describes.) AFTER's
# kernel sources go to $OUT/kernels.tgz (dump_dir).
set -uo pipefail
after="$(cd "${1:?BIN_DIR}" && pwd)"
before="${2:+$(cd "$2" && pwd)}"
here="$(cd "$(dirname "$0")" && pwd)"
out="${OUT:-gpu-out}"; mkdir -p "$out"
export PYTHONUNBUFFERED=1
source "$here/cuda_libs.sh"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
bash "$here/gpu_config.sh" "$after" /tmp/kc-after > /tmp/plugins-after.toml
sed "s|^cache_dir = \"/tmp/kc-after\"|&\ndump_dir = \"/tmp/dump-after\"|" /tmp/plugins-after.toml > /tmp/plugins-after-dump.toml
bins=(--bin "after=$after:/tmp/plugins-after.toml")
if [ -n "$before" ]; then
  bash "$here/gpu_config.sh" "$before" /tmp/kc-before > /tmp/plugins-before.toml
  bins=(--bin "before=$before:/tmp/plugins-before.toml" "${bins[@]}")
fi
st=0
echo "== 1. row kernels and backward regions against the interpreter =="
timeout "${CHECK_S:-240}" python3 "$here/rows_check.py" --bin "$after" --config /tmp/plugins-after-dump.toml --block 2>&1 \
  | tee "$out/rows_check.txt" || st=1
grep -q "rows_check: 0 failures" "$out/rows_check.txt" || st=1
echo "== 2. row kernels: time against the copy floor and torch =="
timeout "${ROWS_S:-240}" python3 "$here/rows_peer.py" "${bins[@]}" --json "$out/rows.json" --regions \
  --only "layer_norm bf16 8192x768" "rms_norm bf16 8192x768" "softmax bf16 8192x4096" "softmax f32 16384x4096" \
         "log_softmax bf16 4096x50257" "cross_entropy bf16 4096x50257" \
  --grad-only "layer_norm bf16 8192x768" "rms_norm bf16 8192x768" "softmax bf16 8192x4096" "cross_entropy" \
  2>&1 | tee "$out/rows.txt"
for b in ${before:+before} after; do
  echo "== 3. GPT-2 block, $b =="
  cfg=/tmp/plugins-$b.toml; [ $b = after ] && cfg=/tmp/plugins-after-dump.toml
  bin=$after; [ $b = before ] && bin=$before
  timeout "${BLOCK_S:-60}" python3 "$here/gpt2_block_peer.py" --bin "$bin" --config "$cfg" --dtype bf16 \
    --json "$out/block_$b.json" 2>&1 | tee "$out/block_$b.txt"
done
(cd /tmp && tar czf "$out/kernels.tgz" dump-after 2>/dev/null)
echo "rows_check.sh: $([ $st = 0 ] && echo PASS || echo FAIL)"
exit $st
