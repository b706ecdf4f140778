#!/usr/bin/env bash
# On the device host's CPU, 2 pinned cores: Winograd's F(2x2, 3x3) for 3x3 stride-1
# convolutions (`executors/cpu-simd/src/winograd.rs`) against the direct paths
# (`THUNDER_CPU_SIMD_WINOGRAD=0`). cpu-simd's unit tests under each ISA, `conv_bench`'s 3x3
# classes alternating in one process, ResNet-50 b1 and b8 against ORT (onnx_peer), then b1
# and b8 alternating processes on and off, and the per-class split of one traced run of each.
# Build here: cargo build --release -p thunder-interpreter -p thunder-cpu-simd &&
#   cargo build --release -p thunder-onnx --example onnx_bench &&
#   cargo test --release -p thunder-cpu-simd --lib --no-run, then copy onnx_bench, the two
#   plugins and the test binary (as cpu_simd_tests) into an ignored folder and carry it.
# Usage: bash scripts/gpu/winograd_ab.sh BIN   (CORES=2,3 ROUNDS=3; SKIP_UNIT=1 skips the tests)
set -u
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/cpu_config.sh"
cpu_setup "$1"
rounds="${ROUNDS:-3}"
[ "${SKIP_UNIT:-0}" = 1 ] || unit_tests_all_isas
echo "== conv_bench 3x3 classes, static weights laid out as the ONNX session does, on (A) / off (B)"
CONV_BENCH_STATIC=1 CONV_BENCH_CHANNELS_LAST=1 CONV_BENCH_ONLY=3x3 RAYON_NUM_THREADS=2 \
  CONV_BENCH_AB=THUNDER_CPU_SIMD_WINOGRAD=0 taskset -c "$cores" "$bin/cpu_simd_tests" conv_bench \
  --ignored --nocapture 2>&1 | grep "B/A" | tee "$out/winograd_conv_bench.txt"
work="$out/winograd_ab"
resnet50_export "$work"
bench() {
  local w=1
  [ "$1" = off ] && w=0
  shift
  THUNDER_CPU_SIMD_WINOGRAD="$w" RAYON_NUM_THREADS=2 THUNDER_CONFIG="$cfg" taskset -c "$cores" \
    "$bin/onnx_bench" resnet50.onnx "$@"
}
resnet50_arms "$rounds" on off
rm -f "$work"/*.onnx "$work"/*.npy
