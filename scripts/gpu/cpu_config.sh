# Sourced by the device-host CPU scripts: `cpu_config BIN FILE` writes a plugins.toml to FILE
# that loads only BIN's cpu-simd and interpreter plugins (no CUDA executor asks to claim).
cpu_config() {
  cat > "$2" <<TOML
plugin_dirs = []
[[executor]]
name = "cpu-simd"
library = "$1/libthunder_cpu_simd.so"
priority = 20
[[executor]]
name = "interpreter"
library = "$1/libthunder_interpreter.so"
priority = 0
TOML
}

# `cpu_setup BIN`: the set-up every device-host CPU script starts with. Sets `bin` (BIN's
# absolute path), `out` ($OUT, made, as an absolute path), `cores` ($CORES, default 2,3) and
# `cfg` (a plugins.toml for BIN's plugins, written by `cpu_config`).
cpu_setup() {
  bin="$(cd "$1" && pwd)"
  # Absolute, so scripts that change folder still write there.
  mkdir -p "${OUT:-gpu-out}"
  out="$(cd "${OUT:-gpu-out}" && pwd)"
  cores="${CORES:-2,3}"
  cfg="$bin/plugins-cpu.toml"
  cpu_config "$bin" "$cfg"
}

# `bench_ab OLD ROUNDS WORKLOADS`: `thunder bench --only WORKLOADS` with OLD's binaries and
# plugins, then with `bin`'s, ROUNDS times (after `cpu_setup`; OLD a folder like BIN), each
# line `round R old|new: WORK MEDIAN UNIT ...`.
bench_ab() {
  local old rounds only r side d
  old="$(cd "$1" && pwd)"
  rounds="$2"
  only="$3"
  cpu_config "$old" "$old/plugins-cpu.toml"
  for r in $(seq "$rounds"); do
    for side in old new; do
      if [ "$side" = old ]; then d="$old"; else d="$bin"; fi
      echo -n "round $r $side: "
      THUNDER_CONFIG="$d/plugins-cpu.toml" taskset -c "$cores" "$d/thunder" bench --min-time 1 \
        --only "$only" 2>/dev/null \
        | grep -E "^(${only//,/|})" | awk '{printf "%s %s %s  ", $1, $2, $3}'
      echo
    done
  done
}

# `unit_tests_all_isas`: cpu-simd's unit-test binary `$bin/cpu_simd_tests` under the default
# ISA, AVX2 and scalar on `cores` (after `cpu_setup`); summary lines to `$out/unit_tests.txt`.
unit_tests_all_isas() {
  local isa
  echo "== cpu-simd unit tests: default ISA, avx2, scalar"
  for isa in "" avx2 scalar; do
    THUNDER_CPU_SIMD_ISA=$isa taskset -c "$cores" "$bin/cpu_simd_tests" 2>&1 \
      | grep -E "FAILED|panicked|test result" | tee -a "$out/unit_tests.txt"
  done
}

# `resnet50_export WORK`: runs the ONNX peer on ResNet-50 once on `cores` (after `cpu_setup`,
# with `here` the scripts' folder), which exports the model and its b1 and b8 inputs into WORK
# and prints its ratio lines; then enters WORK.
resnet50_export() {
  mkdir -p "$1"
  echo "== ResNet-50 against ORT (onnx_peer, exports the model)"
  taskset -c "$cores" python3 "$here/../../benches/peer/onnx_peer.py" --threads 2 --bin "$bin" \
    --config "$cfg" --only resnet50 --reps 3 --work "$1" 2>/dev/null | grep ratio
  cd "$1" || exit 1
}

# `resnet50_arms ROUNDS ARM...`: after `resnet50_export` (in its folder) and with the caller's
# `bench ARM REPS INPUT...` running onnx_bench on resnet50.onnx for one arm: ResNet-50 b1 and
# b8 alternating over the arms ROUNDS times (median and min ms a call), then each arm's
# per-class split of one traced run beside ORT's session profile (`$out/per_class_bB_ARM.txt`).
resnet50_arms() {
  local rounds="$1" r b reps arm px
  shift
  echo "== alternating: median and min ms a call (b1 20 calls, b8 5)"
  for r in $(seq "$rounds"); do
    for b in 1 8; do
      reps=$([ "$b" = 1 ] && echo 20 || echo 5)
      for arm in "$@"; do
        echo "round $r b$b $arm: $(bench "$arm" "$reps" \
          "pixels=in_resnet50_pixels_${b}x3x224x224.npy" | python3 -c \
          'import json,sys; j=json.loads(sys.stdin.read()); print(j["median_ms"], j["min_ms"])')"
      done
    done
  done
  for b in 1 8; do
    echo "== per class, b$b, traced"
    px="in_resnet50_pixels_${b}x3x224x224.npy"
    taskset -c "$cores" python3 "$here/resnet50_per_class.py" ort resnet50.onnx "$px" 6 \
      > "$out/ort_b$b.txt"
    for arm in "$@"; do
      THUNDER_CPU_SIMD_TRACE=1 bench "$arm" 6 "pixels=$px" 2> "$out/trace.log" > /dev/null
      python3 "$here/resnet50_per_class.py" compare "$out/trace.log" "$out/ort_b$b.txt" \
        > "$out/per_class_b${b}_$arm.txt"
      echo "-- $arm: $(tail -1 "$out/per_class_b${b}_$arm.txt")"
    done
  done
  rm -f "$out/trace.log"
}
