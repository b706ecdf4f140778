#!/usr/bin/env bash
# ResNet-50 (batch 1, or BATCH) per convolution class on the device host's CPU: our
# THUNDER_CPU_SIMD_TRACE beside ONNX Runtime's session profile, the same minutes, 2 pinned cores.
# Build here: cargo build --release -p thunder-interpreter -p thunder-cpu-simd &&
#   cargo build --release -p thunder-onnx --example onnx_bench, then copy onnx_bench and the two
#   plugins into an ignored folder (e.g. .gpu-cpu-after) and carry it.
# Usage: bash scripts/gpu/resnet50_per_class.sh BIN   (CORES=2,3; BATCH=8 for batch 8, REPS=10)
set -u
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/cpu_config.sh"
cpu_setup "$1"
batch="${BATCH:-1}"
reps="${REPS:-10}"
work="$out/resnet50_per_class"
resnet50_export "$work"
THUNDER_CPU_SIMD_TRACE=1 RAYON_NUM_THREADS=2 THUNDER_CONFIG="$cfg" taskset -c "$cores" \
  "$bin/onnx_bench" resnet50.onnx "$reps" "pixels=in_resnet50_pixels_${batch}x3x224x224.npy" \
  2> "$out/trace.log" | tail -1
taskset -c "$cores" python3 "$here/resnet50_per_class.py" ort resnet50.onnx \
  "in_resnet50_pixels_${batch}x3x224x224.npy" "$reps" > "$out/ort.txt"
python3 "$here/resnet50_per_class.py" compare "$out/trace.log" "$out/ort.txt" | tee "$out/per_class.txt"
grep -v Conv "$out/ort.txt"
rm -f "$work"/*.onnx "$work"/*.npy
