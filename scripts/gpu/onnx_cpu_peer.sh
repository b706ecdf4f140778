#!/usr/bin/env bash
# ONNX models on the device host's CPU against ONNX Runtime (issue 19), on 2 pinned cores, so the
# ratios come from a quiet machine (the build machine is shared by several builders).
# Build here (both builds, so the run compares them on the same cores):
#   cargo build --release -p thunder-interpreter -p thunder-cpu-simd
#   cargo build --release -p thunder-onnx --example onnx_bench   (`--example` builds only it)
#   mkdir -p .gpu-cpu-after && cp target/release/examples/onnx_bench target/release/libthunder_cpu_simd.so \
#       target/release/libthunder_interpreter.so .gpu-cpu-after/
#   (the same from a build of the base commit into .gpu-cpu-before/, optional)
# (ignored folders: pass them in `carry`) then on the device:  bash scripts/gpu/onnx_cpu_peer.sh .gpu-cpu-after [.gpu-cpu-before]
# Prints, per model, thunder and ORT (CPU execution provider, same 2 threads) median latency,
# their ratio, thunder's first call split into load / translate / compile, and the largest
# output difference against ORT. ONLY=minilm,gpt2,resnet50 limits the models; CORES=2,3 the cores.
set -uo pipefail
source "$(dirname "$0")/cpu_config.sh"
out="${OUT:-gpu-out}"
cores="${CORES:-2,3}"
mkdir -p "$out"
status=0
for bin in "$@"; do
  bin="$(cd "$bin" && pwd)"
  cfg="$bin/plugins-cpu.toml"
  cpu_config "$bin" "$cfg"
  echo "== $bin on cores $cores (lscpu: $(lscpu | sed -n 's/^Model name: *//p'))"
  taskset -c "$cores" python3 benches/peer/onnx_peer.py --threads 2 --bin "$bin" --config "$cfg" \
    --only "${ONLY:-minilm,gpt2,resnet50}" --reps "${REPS:-10}" --work "$out/onnx_cpu_peer" || status=$?
  cp "$out/onnx_cpu_peer/results.json" "$out/onnx_cpu_peer_$(basename "$bin" | sed "s/^[.]//").json" 2>/dev/null
done
rm -f "$out"/onnx_cpu_peer/*.onnx "$out"/onnx_cpu_peer/*.npy
exit $status
