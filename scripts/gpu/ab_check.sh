#!/usr/bin/env bash
# One device call comparing two builds on the GPT-2 workloads of issue 17, on the same warm GPU:
#   1. the GPT-2 block fwd+bwd (bf16 B8 T1024) per region, BEFORE then AFTER, eager beside each;
#   2. Nsight Compute on AFTER's first cuda-fuser launches of the block (duration, DRAM
#      throughput, registers and achieved occupancy of each kernel; NCU_COUNT launches);
#   3. the GPT-2 small training step with AFTER beside eager.
# BEFORE needs the `thunder` binary and the plugins; AFTER as built by wave_check.sh (wheel too).
#   bash scripts/gpu/ab_check.sh AFTER_DIR BEFORE_DIR
set -uo pipefail
after="$(cd "${1:?AFTER_DIR}" && pwd)"
before="$(cd "${2:?BEFORE_DIR}" && pwd)"
here="$(cd "$(dirname "$0")" && pwd)"
out="${OUT:-gpu-out}"; mkdir -p "$out"
source "$here/cuda_libs.sh"
bash "$here/gpu_config.sh" "$before" /tmp/kc-ab-before > /tmp/plugins-ab-before.toml
bash "$here/gpu_config.sh" "$after" /tmp/kc-ab-after > /tmp/plugins-ab-after.toml
echo "=== 1. GPT-2 block, before ($(cat "$before/COMMIT" 2>/dev/null)) then after ($(cat "$after/COMMIT" 2>/dev/null))"
for who in before after; do
  dir=$before; [ $who = after ] && dir=$after
  echo "--- $who"
  timeout 150 python3 "$here/gpt2_block_peer.py" --bin "$dir" --config /tmp/plugins-ab-$who.toml \
    --json "$out/block_$who.json" | grep -v "^\s*$"
done
echo "=== 2. ncu: after's first ${NCU_COUNT:-40} cuda-fuser launches of the block"
if command -v ncu >/dev/null; then
  inputs=$(python3 "$here/gpt2_block_peer.py" --write-program /tmp/ab_block.py)
  # shellcheck disable=SC2086 # the -i arguments are words
  timeout 240 ncu --target-processes all --clock-control none -k regex:thunder_fused \
    --launch-count "${NCU_COUNT:-40}" --section SpeedOfLight --section LaunchStats --section Occupancy \
    "$after/thunder" --config /tmp/plugins-ab-after.toml bench /tmp/ab_block.py \
    --device cuda:0 --grad --reps 1 $inputs > "$out/ncu.txt" 2>&1
  grep -E "thunder_fused|Duration|DRAM Throughput|Registers Per Thread|Achieved Occupancy|Block Limit Registers" "$out/ncu.txt" \
    | sed 's/  */ /g' | head -200
else
  echo "ncu not found"
fi
echo "=== 3. GPT-2 small step, after beside eager"
python3 -m pip install --no-deps --no-index --force-reinstall --quiet --target /tmp/thunder-ab-py "$after"/thunder_rs-*.whl \
  && export PYTHONPATH="/tmp/thunder-ab-py:${PYTHONPATH:-}"
THUNDER_CONFIG=/tmp/plugins-ab-after.toml timeout 200 python3 "$here/gpt2_train_peer.py" --peers thunder,eager \
  --json "$out/step_after.json" | grep -v "^\s*$"
