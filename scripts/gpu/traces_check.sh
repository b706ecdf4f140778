#!/usr/bin/env bash
# The execution traces (regions and the ops each runs) of the GPT-2 block and of the rest of
# GPT-2 (embedding, final norm, LM head, loss) as the GPU executors claim them, fwd+bwd bf16
# B8 T1024, into $OUT/{block,head}_traces.txt, with each region's time in $OUT/{block,head}.json.
#   bash scripts/gpu/traces_check.sh BIN_DIR
set -uo pipefail
bin="$(cd "${1:-.gpu-bin}" && pwd)"
here="$(cd "$(dirname "$0")" && pwd)"
out="${OUT:-gpu-out}"; mkdir -p "$out"
source "$here/cuda_libs.sh"
bash "$here/gpu_config.sh" "$bin" /tmp/kc-traces > /tmp/plugins-traces.toml
inputs=$(python3 "$here/gpt2_block_peer.py" --write-program /tmp/traces_block.py)
# shellcheck disable=SC2086 # the -i arguments are words
timeout 120 "$bin/thunder" --config /tmp/plugins-traces.toml bench /tmp/traces_block.py --device cuda:0 \
  --grad --reps 5 --json --print-traces $inputs > "$out/block.json" 2> "$out/block_traces.txt"
echo "block: rc $?, $(grep -c 'region' "$out/block_traces.txt") region lines"
python3 - <<'PY'
import numpy as np, sys
sys.path.insert(0, "scripts/gpu")
from gpt2_head_peer import program
B, T, C, V = 8, 1024, 768, 50304
open("/tmp/traces_head.py", "w").write(program(B, T, C, V))
rng = np.random.default_rng(0)
np.save("/tmp/traces_idx.npy", rng.integers(0, V, (B, T), dtype=np.int64))
np.save("/tmp/traces_tgt.npy", rng.integers(0, V, (B, T), dtype=np.int64))
PY
timeout 120 "$bin/thunder" --config /tmp/plugins-traces.toml bench /tmp/traces_head.py --device cuda:0 \
  --grad --reps 5 --json --print-traces -i idx=/tmp/traces_idx.npy -i tgt=/tmp/traces_tgt.npy \
  -i wte=randn:bf16[50304,768] -i x=randn:bf16[8,1024,768] -i ln_w=randn:bf16[768] -i ln_b=randn:bf16[768] \
  > "$out/head.json" 2> "$out/head_traces.txt"
echo "head: rc $?, $(grep -c 'region' "$out/head_traces.txt") region lines"
