#!/usr/bin/env bash
# On the device host's CPU, 2 pinned cores: (1) whether the two cores share a physical core
# (tanh4, compute-bound, on one thread against two on CORES and on OTHER_CORES); (2) where
# ResNet-50 b1's time goes outside the convolutions: the untraced call beside the traced
# regions' stages (THUNDER_CPU_SIMD_TRACE summed by kind), with the one-row kernel (the
# default) and without it (THUNDER_CPU_SIMD_GEMV=0), alternating.
# Build here: cargo build --release -p thunder-cli -p thunder-interpreter -p thunder-cpu-simd &&
#   cargo build --release -p thunder-onnx --example onnx_bench, then copy thunder, onnx_bench
#   and the two plugins into an ignored folder (e.g. .gpu-cpu) and carry it.
# Usage: bash scripts/gpu/xeon_where.sh BIN   (CORES=2,3 OTHER_CORES=2,10 ROUNDS=3)
set -u
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/cpu_config.sh"
cpu_setup "$1"
other="${OTHER_CORES:-2,10}"
rounds="${ROUNDS:-3}"
first="${cores%%,*}"
echo "== topology"
lscpu | grep -E "Model name|Thread|Core|Socket|NUMA node"
for c in ${cores//,/ } ${other//,/ }; do
  t=/sys/devices/system/cpu/cpu$c/topology
  echo "cpu$c: core_id $(cat $t/core_id) siblings $(cat $t/thread_siblings_list)"
done
echo "== tanh4 and the copy floor: one thread on $first, two on $cores, two on $other"
for r in $(seq "$rounds"); do
  for spec in "$first:1" "$cores:2" "$other:2"; do
    echo -n "round $r cores ${spec%%:*} threads ${spec##*:}: "
    RAYON_NUM_THREADS=${spec##*:} THUNDER_CONFIG="$cfg" taskset -c "${spec%%:*}" "$bin/thunder" \
      bench --min-time 1 --only copy_64mb,tanh4_16m 2>/dev/null \
      | grep -E "^(copy|tanh)" | awk '{printf "%s %s %s  ", $1, $2, $3}'
    echo
  done
done
work="$out/resnet50_where"
resnet50_export "$work"
px="pixels=in_resnet50_pixels_1x3x224x224.npy"
bench() {
  RAYON_NUM_THREADS=2 THUNDER_CONFIG="$cfg" taskset -c "$cores" "$bin/onnx_bench" \
    resnet50.onnx "$@"
}
echo "== one-row kernel: default against THUNDER_CPU_SIMD_GEMV=0, alternating, traced (stages by"
echo "   kind per call over 21 calls, the first included)"
for r in $(seq "$rounds"); do
  for g in default 0; do
    echo "-- round $r gemv $g"
    THUNDER_CPU_SIMD_GEMV=${g/default/} THUNDER_CPU_SIMD_TRACE=1 bench 20 "$px" \
      2> "$out/trace_r50_$g.log" | python3 -c 'import json,sys; j=json.loads(sys.stdin.read()); print("median (traced)", j["median_ms"], "min", j["min_ms"])'
    python3 "$here/../cpu_simd_trace_summary.py" "$out/trace_r50_$g.log" --regions-per-call 1 \
      | sed -n 1,7p
  done
done
rm -f "$work"/*.onnx "$work"/*.npy
