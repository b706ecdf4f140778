#!/usr/bin/env bash
# The GPT-2 block (fwd+bwd, bf16 B8 T1024) and the GPT-2 small training step under two row
# tunings (THUNDER_CUDA_FUSER_ROWS, see executors/cuda-fuser/src/row_vector.rs), alternating
# A B A B in one call, eager beside the first. On the device, carry [".gpu-bin"]:
#   bash scripts/gpu/tuning_ab.sh .gpu-bin "vectors=1,warp_rows=0" ""
set -uo pipefail
bin="$(cd "${1:-.gpu-bin}" && pwd)"
a="${2-vectors=1,warp_rows=0}"
b="${3-}"
here="$(dirname "$0")"
out="${OUT:-gpu-out}"
mkdir -p "$out"
source "$here/cuda_libs.sh"
cfg="${TMPDIR:-/tmp}/plugins-ab.toml"
bash "$here/gpu_config.sh" "$bin" "${TMPDIR:-/tmp}/thunder-ab-kernel-cache" > "$cfg"
export THUNDER_CONFIG="$cfg"
py="${TMPDIR:-/tmp}/thunder-ab-py"
python3 -m pip install --no-deps --no-index --force-reinstall --quiet --target "$py" "$bin"/thunder_rs-*.whl \
  && export PYTHONPATH="$py:${PYTHONPATH:-}"
args=$(python3 "$here/gpt2_block_peer.py" --write-program "${TMPDIR:-/tmp}/ab_block.py")
peers=thunder,eager
for round in 1 2; do
  for setting in "$a" "$b"; do
    name="${setting:-default}"
    name="${name//[=,]/_}"
    echo "=== round $round, THUNDER_CUDA_FUSER_ROWS='$setting'"
    # shellcheck disable=SC2086
    THUNDER_CUDA_FUSER_ROWS="$setting" timeout 120 "$bin/thunder" --config "$cfg" bench "${TMPDIR:-/tmp}/ab_block.py" \
      --device cuda:0 --grad --json --reps 30 $args > "$out/block_${name}_$round.json" \
      && python3 -c 'import json,sys; s=json.load(open(sys.argv[1]))["steady"]; print("block fwd+bwd: median %.3f ms, min %.3f ms" % (s["median_ms"], s["min_ms"]))' "$out/block_${name}_$round.json"
    THUNDER_CUDA_FUSER_ROWS="$setting" timeout 150 python3 "$here/gpt2_train_peer.py" --config small --batch 8 \
      --seq 1024 --dtype bf16 --peers "$peers" --reps 10 2>&1 | grep -E "step|/ eager"
    peers=thunder
  done
done
