#!/usr/bin/env bash
# ONNX models on 2 pinned cores of the device host's CPU against ONNX Runtime, alternating an
# environment switch between rounds (same build, same cores, same load), e.g. the ONNX
# session's convolution weight layout:
#   VAR=THUNDER_ONNX_CONV_LAYOUT VALS="1 0" ROUNDS=3 ONLY=resnet50 bash scripts/gpu/onnx_cpu_ab.sh .gpu-cpu
# Build here first (ignored folder, pass it in `carry`):
#   cargo build --release -p thunder-interpreter -p thunder-cpu-simd
#   cargo build --release -p thunder-onnx --example onnx_bench   (`--example` builds only it)
#   mkdir -p .gpu-cpu && cp target/release/examples/onnx_bench target/release/libthunder_cpu_simd.so \
#       target/release/libthunder_interpreter.so .gpu-cpu/
# Prints each round's onnx_peer lines prefixed with VAR=value; the models are exported once.
set -uo pipefail
source "$(dirname "$0")/cpu_config.sh"
cpu_setup "$1"
echo "== $bin on cores $cores (lscpu: $(lscpu | sed -n 's/^Model name: *//p'))"
status=0
for r in $(seq "${ROUNDS:-3}"); do
  for v in ${VALS:-1 0}; do
    env "$VAR=$v" taskset -c "$cores" python3 benches/peer/onnx_peer.py --threads 2 --bin "$bin" \
      --config "$cfg" --only "${ONLY:-resnet50}" --reps "${REPS:-10}" --work "$out/onnx_cpu_ab" \
      2>&1 | grep -E "thunder .* ORT" | sed "s/^/$VAR=$v round $r: /" || status=$?
  done
done
rm -f "$out"/onnx_cpu_ab/*.onnx "$out"/onnx_cpu_ab/*.npy
exit $status
