#!/usr/bin/env bash
# On the device host's CPU, 2 pinned cores: which ResNet-50 convolution weights the ONNX
# session should lay out with their output channels last (`thunder-onnx/src/conv_layout.rs`)
# on this CPU. Arms: the default (3x3s and the stem up to 1 MiB), every 3x3 (no byte limit),
# 1x1s too (up to 1 MiB), and everything. ResNet-50 b1 and b8 (onnx_bench) alternating
# processes, then per convolution class for each arm beside ORT's session profile.
# Build here: cargo build --release -p thunder-interpreter -p thunder-cpu-simd &&
#   cargo build --release -p thunder-onnx --example onnx_bench, then copy onnx_bench and the
#   two plugins into an ignored folder and carry it.
# Usage: bash scripts/gpu/conv_layout_ab.sh BIN   (CORES=2,3 ROUNDS=3)
set -u
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/cpu_config.sh"
cpu_setup "$1"
rounds="${ROUNDS:-3}"
work="$out/conv_layout_ab"
resnet50_export "$work"
arms="default all3x3 1x1 all"
arm_env() {
  case "$1" in
    default) echo "" ;;
    all3x3) echo "THUNDER_ONNX_CONV_LAYOUT_MAX_BYTES=1000000000" ;;
    1x1) echo "THUNDER_ONNX_CONV_LAYOUT_1X1=1" ;;
    all) echo "THUNDER_ONNX_CONV_LAYOUT_MAX_BYTES=1000000000 THUNDER_ONNX_CONV_LAYOUT_1X1=1" ;;
  esac
}
bench() {
  local arm="$1"
  shift
  env $(arm_env "$arm") RAYON_NUM_THREADS=2 THUNDER_CONFIG="$cfg" taskset -c "$cores" \
    "$bin/onnx_bench" resnet50.onnx "$@"
}
ms() {
  python3 -c 'import json,sys; j=json.loads(sys.stdin.read()); print(j["median_ms"], j["min_ms"])'
}
echo "== alternating: median and min ms a call (b1 20 calls, b8 5)"
for r in $(seq "$rounds"); do
  for b in 1 8; do
    reps=$([ "$b" = 1 ] && echo 20 || echo 5)
    for arm in $arms; do
      echo "round $r b$b $arm: $(bench "$arm" "$reps" "pixels=in_resnet50_pixels_${b}x3x224x224.npy" | ms)"
    done
  done
done
for b in 1 8; do
  echo "== per class, b$b, traced"
  px="in_resnet50_pixels_${b}x3x224x224.npy"
  taskset -c "$cores" python3 "$here/resnet50_per_class.py" ort resnet50.onnx "$px" 6 \
    > "$out/ort_b$b.txt"
  for arm in $arms; do
    THUNDER_CPU_SIMD_TRACE=1 bench "$arm" 6 "pixels=$px" 2> "$out/trace.log" > /dev/null
    python3 "$here/resnet50_per_class.py" compare "$out/trace.log" "$out/ort_b$b.txt" \
      > "$out/per_class_b${b}_$arm.txt"
    echo "-- $arm: $(tail -1 "$out/per_class_b${b}_$arm.txt")"
  done
done
rm -f "$work"/*.onnx "$work"/*.npy "$out/trace.log"
