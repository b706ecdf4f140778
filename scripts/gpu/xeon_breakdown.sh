#!/usr/bin/env bash
# On the device host's AVX-512 CPU: cpu-simd's unit tests under AVX-512, AVX2 and scalar; where
# the GPT-2 block's time goes, ours (`THUNDER_CPU_SIMD_TRACE` summary) beside PyTorch eager's
# (`benches/peer/block_profile.py`); and tanh4 against the copy floor on the AVX-512 and the
# AVX2 paths, alternating.
# Usage: `bash scripts/gpu/xeon_breakdown.sh BIN`, BIN a folder holding `thunder`, the two
# plugins and `cpu_simd_tests` (the cpu-simd unit-test binary). ROUNDS (default 3).
set -u
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/cpu_config.sh"
cpu_setup "$1"
rounds="${ROUNDS:-3}"
export THUNDER_EXECUTORS=cpu-simd,interpreter RAYON_NUM_THREADS=2
lscpu | grep -E "Model name|Thread|Core|MHz"
grep -o 'avx512[a-z_]*' /proc/cpuinfo | sort -u | tr '\n' ' '
echo
unit_tests_all_isas
echo "== the traced block: where the time goes"
THUNDER_CONFIG="$cfg" THUNDER_CPU_SIMD_TRACE=1 taskset -c "$cores" "$bin/thunder" bench \
  --min-time 1 --only gpt2_block 2> "$out/trace_block.log" | grep gpt2
python3 "$here/../cpu_simd_trace_summary.py" "$out/trace_block.log" | head -40 \
  | tee "$out/trace_block_summary.txt"
echo "== PyTorch eager's block by op"
taskset -c "$cores" python3 "$here/../../benches/peer/block_profile.py" --threads 2 --calls 50 \
  --rows 16 2>/dev/null | cut -c1-160 | tee "$out/torch_block_profile.txt"
echo "== tanh4 and the copy floor: AVX-512 and AVX2 paths alternating"
for r in $(seq "$rounds"); do
  for isa in avx512 avx2; do
    echo -n "round $r $isa: "
    THUNDER_CPU_SIMD_ISA=$isa THUNDER_CONFIG="$cfg" taskset -c "$cores" "$bin/thunder" bench \
      --min-time 1 --only copy_64mb,tanh4_16m,gpt2_block 2>/dev/null \
      | grep -E "^(copy|tanh|gpt2)" | awk '{printf "%s %s %s  ", $1, $2, $3}'
    echo
  done
done | tee "$out/tanh4_isa.txt"
