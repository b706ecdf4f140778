#!/usr/bin/env bash
# On the device host's AVX-512 CPU, 2 pinned cores: `thunder bench`'s GPT-2 block and MLP step
# alternating a plugin that streams every few-row product (OLD) and one that streams only right
# operands of 2 MiB or more (NEW, `gemm_stream::MIN_RIGHT_BYTES`), then issue 20's rows beside
# PyTorch eager with NEW. Usage: `bash scripts/gpu/stream_rule_ab.sh NEW OLD`, each a folder
# holding `thunder` and the two plugins. ROUNDS (default 5).
set -u
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/cpu_config.sh"
cpu_setup "$1"
old="$2"
rounds="${ROUNDS:-5}"
export THUNDER_EXECUTORS=cpu-simd,interpreter RAYON_NUM_THREADS=2
echo "== thunder bench, OLD and NEW alternating"
bench_ab "$old" "$rounds" gpt2_block,train_step_mlp | tee "$out/ab.txt"
echo "== issue 20's rows with NEW beside PyTorch eager"
THUNDER_CONFIG="$cfg" taskset -c "$cores" python3 "$here/../../benches/peer/issue20_rounds.py" \
  --thunder "$bin/thunder" --rounds "$rounds" --threads 2 --min-time 1 2>&1 | tail -8 \
  | tee "$out/issue20_rounds.txt"
