#!/usr/bin/env bash
# On the device host's CPU: products paired side by side (`gemm_pair.rs`, the default) against
# `THUNDER_CPU_SIMD_PAIR=0`, rounds alternating on 2 pinned cores (the GPT-2 block and the MLP
# step; the block has two pairs, the MLP step none), then issue 20's rows beside PyTorch eager
# with pairing on. Usage: `bash scripts/gpu/pair_ab.sh BIN` where BIN holds `thunder` and the
# two plugins (see cpu_peers.sh for the build). ROUNDS (default 6); SKIP_PEER=1 skips PyTorch.
set -u
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/cpu_config.sh"
cpu_setup "$1"
rounds="${ROUNDS:-6}"
lscpu | grep -E "Model name"
echo "== thunder bench, alternating (pair=1 default, pair=0 off)"
for r in $(seq "$rounds"); do
  for p in 1 0; do
    echo -n "round $r pair=$p: "
    THUNDER_CPU_SIMD_PAIR=$p THUNDER_CONFIG="$cfg" THUNDER_EXECUTORS=cpu-simd,interpreter \
      RAYON_NUM_THREADS=2 taskset -c "$cores" "$bin/thunder" bench --min-time 1 \
      --only gpt2_block,train_step_mlp 2>/dev/null \
      | grep -E "^(gpt2|train)" | awk '{printf "%s %s %s  ", $1, $2, $4}'
    echo
  done
done | tee "$out/pair_ab.txt"
[ -n "${SKIP_PEER:-}" ] && exit 0
echo "== issue 20 rows beside PyTorch eager (pairing on)"
THUNDER_CONFIG="$cfg" THUNDER_EXECUTORS=cpu-simd,interpreter RAYON_NUM_THREADS=2 \
  taskset -c "$cores" python3 "$here/../../benches/peer/issue20_rounds.py" \
  --thunder "$bin/thunder" --rounds "$rounds" --threads 2 --min-time 1 2>&1 \
  | grep -E "^round|->|machine" | tee "$out/issue20_rounds.txt"
