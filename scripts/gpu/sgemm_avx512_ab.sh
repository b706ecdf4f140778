#!/usr/bin/env bash
# On the device host's AVX-512 CPU: f32 products on `matrixmultiply`'s AVX-512 kernel
# (`THUNDER_CPU_SIMD_SGEMM=avx512`) against the `gemm` crate's x86-v4 kernels (the default
# there), rounds alternating, on 2 pinned cores; then issue 20's rows beside PyTorch eager with
# each. Usage: `bash scripts/gpu/sgemm_avx512_ab.sh BIN` where BIN holds `thunder`, the two
# plugins and `cpu_simd_tests` (the cpu-simd unit-test binary). ROUNDS (default 3).
set -u
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/cpu_config.sh"
cpu_setup "$1"
rounds="${ROUNDS:-3}"
lscpu | grep -E "Model name|Flags" | sed 's/Flags:.*\(avx512[a-z_]*\).*/avx512 present/' | head -3
echo "== sgemm_bench (one thread, matrixmultiply's kernel against the gemm crate's, per shape)"
THUNDER_CPU_SIMD_SGEMM=avx512 RAYON_NUM_THREADS=1 taskset -c "${cores%%,*}" \
  "$bin/cpu_simd_tests" sgemm_bench --ignored --nocapture 2>&1 | grep GFLOP | tee "$out/sgemm_bench.txt"
echo "== block_gemm_bench, gemm crate then matrixmultiply"
for mode in x avx512; do
  echo "-- THUNDER_CPU_SIMD_SGEMM=$mode"
  THUNDER_CPU_SIMD_SGEMM=$mode RAYON_NUM_THREADS=2 taskset -c "$cores" \
    "$bin/cpu_simd_tests" block_gemm_bench --ignored --nocapture 2>&1 | grep GFLOP
done | tee "$out/block_gemm_bench.txt"
echo "== thunder bench, alternating"
for r in $(seq "$rounds"); do
  for mode in x avx512; do
    echo -n "round $r SGEMM=$mode: "
    THUNDER_CPU_SIMD_SGEMM=$mode THUNDER_CONFIG="$cfg" THUNDER_EXECUTORS=cpu-simd,interpreter \
      RAYON_NUM_THREADS=2 taskset -c "$cores" "$bin/thunder" bench --min-time 1 \
      --only sgemm_2048,gpt2_block,train_step_mlp 2>/dev/null \
      | grep -E "^(sgemm|gpt2|train)" | awk '{printf "%s %s %s  ", $1, $2, $4}'
    echo
  done
done | tee "$out/thunder_bench_ab.txt"
echo "== issue 20 rows beside PyTorch eager, each mode"
for mode in avx512 x; do
  echo "-- THUNDER_CPU_SIMD_SGEMM=$mode"
  THUNDER_CPU_SIMD_SGEMM=$mode THUNDER_CONFIG="$cfg" THUNDER_EXECUTORS=cpu-simd,interpreter \
    RAYON_NUM_THREADS=2 taskset -c "$cores" python3 "$here/../../benches/peer/issue20_rounds.py" \
    --thunder "$bin/thunder" --rounds "$rounds" --threads 2 --min-time 1 2>&1 \
    | grep -E "^round|->|machine"
done | tee "$out/issue20_rounds_ab.txt"
