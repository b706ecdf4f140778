#!/usr/bin/env bash
# On the device host's AVX-512 CPU, 2 pinned cores: cpu-simd's unit tests under AVX-512, AVX2
# and scalar (the attention kernels' strided outputs on every path); the GPT-2 block with OLD's
# binaries against NEW's, alternating; then issue 20's rows beside PyTorch eager.
# Usage: `bash scripts/gpu/xeon_attn_placement.sh NEW OLD`, each a folder holding `thunder` and
# the two CPU plugins (NEW also `cpu_simd_tests`). ROUNDS (default 4), PEER_ROUNDS (default 3);
# SKIP_UNIT=1 leaves out the unit tests.
set -u
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/cpu_config.sh"
cpu_setup "$1"
export THUNDER_EXECUTORS=cpu-simd,interpreter RAYON_NUM_THREADS=2
lscpu | grep -E "Model name"
[ -n "${SKIP_UNIT:-}" ] || unit_tests_all_isas
echo "== gpt2_block and the MLP step, old against new, alternating"
bench_ab "$2" "${ROUNDS:-4}" gpt2_block,train_step_mlp | tee "$out/block_ab.txt"
echo "== issue 20's rows beside PyTorch"
THUNDER_CONFIG="$cfg" taskset -c "$cores" python3 "$here/../../benches/peer/issue20_rounds.py" \
  --thunder "$bin/thunder" --rounds "${PEER_ROUNDS:-3}" --min-time 1 --threads 2 2>&1 \
  | grep -v "^bench:" | tee "$out/issue20_xeon.txt"
