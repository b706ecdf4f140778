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
resnet50_arms "$rounds" $arms
rm -f "$work"/*.onnx "$work"/*.npy
