#!/usr/bin/env bash
# On the device host's AVX-512 CPU, 2 pinned cores: the GPT-2 block's twelve products on
# cpu-simd (`block_gemm_bench`: one thread, threaded, threaded on a worker) with the streaming
# kernel on and off (`THUNDER_CPU_SIMD_STREAM=0`), beside PyTorch's rate on the same shapes.
# Usage: `bash scripts/gpu/xeon_block_gemm.sh BIN`, BIN holding `cpu_simd_tests`.
set -u
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/cpu_config.sh"
cpu_setup "$1"
export RAYON_NUM_THREADS=2
for stream in 1 0; do
  echo "== cpu-simd, THUNDER_CPU_SIMD_STREAM=$stream"
  THUNDER_CPU_SIMD_STREAM=$stream taskset -c "$cores" "$bin/cpu_simd_tests" block_gemm_bench \
    --ignored --nocapture 2>&1 | grep GFLOP | tee -a "$out/block_gemm_stream$stream.txt"
done
echo "== PyTorch"
taskset -c "$cores" python3 "$here/../../benches/peer/block_gemm_torch.py" --threads 2 2>&1 \
  | tail -10 | tee "$out/block_gemm_torch.txt"
