#!/usr/bin/env bash
# Issues 19 and 20 on the device host's CPU, 2 pinned cores, in one command: `thunder bench
# --json` then `torch_peer.py --sections issue7` (PyTorch beside, same cores, 2 threads), ROUNDS
# times, then `onnx_cpu_peer.sh` (ONNX Runtime beside). Build here first:
#   cargo build --release -p thunder-interpreter -p thunder-cpu-simd -p thunder-cli
#   cargo build --release -p thunder-onnx --example onnx_bench
#   mkdir -p .gpu-cpu && cp target/release/thunder target/release/examples/onnx_bench \
#       target/release/libthunder_cpu_simd.so target/release/libthunder_interpreter.so .gpu-cpu/
# then on the device (carry .gpu-cpu):  bash scripts/gpu/cpu_peers.sh .gpu-cpu
# Writes $OUT/bench_N.json, $OUT/torch_peer_N.txt, $OUT/onnx_cpu_peer_*.json and prints all.
set -uo pipefail
source "$(dirname "$0")/cpu_config.sh"
cpu_setup "$1"
echo "== $(lscpu | sed -n 's/^Model name: *//p'); flags: $(grep -o 'avx512[a-z_0-9]*\|amx[a-z_0-9]*' /proc/cpuinfo | sort -u | tr '\n' ' ')"
status=0
if [ -z "${SKIP_ISSUE20:-}" ]; then
  for r in $(seq "${ROUNDS:-2}"); do
    THUNDER_CONFIG="$cfg" THUNDER_EXECUTORS=cpu-simd,interpreter RAYON_NUM_THREADS=2 \
      taskset -c "$cores" "$bin/thunder" bench --json --min-time 1 > "$out/bench_$r.json" || status=$?
    taskset -c "$cores" python3 benches/peer/torch_peer.py --sections issue7 --issue7-threads 2 \
      --issue7-min-time 1 --thunder-bench "$out/bench_$r.json" 2>&1 | tee "$out/torch_peer_$r.txt" || status=$?
  done
fi
if [ -z "${SKIP_ISSUE19:-}" ]; then
  OUT="$out" CORES="$cores" bash "$(dirname "$0")/onnx_cpu_peer.sh" "$bin" || status=$?
fi
exit $status
