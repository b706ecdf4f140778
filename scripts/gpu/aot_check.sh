#!/usr/bin/env bash
# On the device host's AVX-512 CPU: the programs compiled ahead of time (`chain_aot.rs`)
# checked on the AVX-512 path (cpu-simd's chain tests, then again under
# THUNDER_CPU_SIMD_ISA=avx2), which of the GPT-2 block's groups they take, the block and the
# MLP step alternating a plugin without them (OLD) and with them (NEW) on 2 pinned cores, and
# issue 20's rows beside PyTorch eager with NEW.
# Usage: `bash scripts/gpu/aot_check.sh NEW OLD`, each a folder holding `thunder` and the two
# plugins, NEW also `cpu_simd_tests` (the cpu-simd unit-test binary). ROUNDS (default 4).
set -u
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/cpu_config.sh"
cpu_setup "$1"
old="$2"
rounds="${ROUNDS:-4}"
export THUNDER_EXECUTORS=cpu-simd,interpreter RAYON_NUM_THREADS=2
lscpu | grep -E "Model name"
grep -o 'avx512[a-z_]*' /proc/cpuinfo | sort -u | tr '\n' ' '
echo
echo "== cpu-simd chain tests: AVX-512, then AVX2"
"$bin/cpu_simd_tests" chain 2>&1 | grep -E "^test |test result" | tee "$out/chain_tests.txt"
THUNDER_CPU_SIMD_ISA=avx2 "$bin/cpu_simd_tests" chain 2>&1 | grep -E "test result" | tee -a "$out/chain_tests.txt"
echo "== the traced block with NEW: compiled groups, then where the time goes"
THUNDER_CONFIG="$cfg" THUNDER_CPU_SIMD_TRACE=1 taskset -c "$cores" "$bin/thunder" bench \
  --min-time 0.5 --only gpt2_block 2> "$out/trace_new.log" >/dev/null
grep "runs as a chain: Aot" "$out/trace_new.log" | cut -c1-110
python3 "$here/../cpu_simd_trace_summary.py" "$out/trace_new.log" | head -24
echo "== thunder bench, OLD and NEW alternating"
bench_ab "$old" "$rounds" gpt2_block,train_step_mlp | tee "$out/ab.txt"
echo "== issue 20's rows with NEW beside PyTorch eager"
THUNDER_CONFIG="$cfg" taskset -c "$cores" python3 "$here/../../benches/peer/issue20_rounds.py" \
  --thunder "$bin/thunder" --rounds "$rounds" --threads 2 --min-time 1 2>&1 | tail -14 \
  | tee "$out/issue20_rounds.txt"
