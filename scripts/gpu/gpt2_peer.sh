#!/usr/bin/env bash
# The GPT-2 block forward+backward on cuda:0 beside PyTorch eager and torch.compile (issue 17's
# baseline). Build here, copy target/release/{thunder,*.so} to .gpu-bin, then on the device:
#   bash scripts/gpu/gpt2_peer.sh .gpu-bin
set -euo pipefail
bin="${1:-target/release}"
out="${OUT:-gpu-out}"
mkdir -p "$out"
source "$(dirname "$0")/cuda_libs.sh"
cfg="$out/plugins-gpu.toml"
bash "$(dirname "$0")/gpu_config.sh" "$bin" > "$cfg"
status=0
for dtype in ${DTYPES:-bf16 f32}; do
  python3 "$(dirname "$0")/gpt2_block_peer.py" --bin "$bin" --config "$cfg" --dtype "$dtype" \
    --shape "${SHAPE:-8,1024,768,12}" --json "$out/gpt2_block_$dtype.json" || status=$?
done
exit $status
