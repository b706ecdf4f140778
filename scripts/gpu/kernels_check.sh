#!/usr/bin/env bash
# The cuda-kernels library on the lent GPU machine (no cargo there). Build here with
#   cargo build --release -p thunder-cli -p thunder-cuda-kernels -p thunder-cuda-fuser \
#     -p thunder-cublas -p thunder-cudnn -p thunder-interpreter
#   mkdir -p .gpu-bin && cp target/release/thunder target/release/*.so .gpu-bin/
# then run on the device with carry [".gpu-bin"]:
#   bash scripts/gpu/kernels_check.sh .gpu-bin [comma-separated op ids]
# It runs the OpInfo samples (all, or the listed ops) on cuda:0 with every GPU executor and
# compares each with the interpreter on the CPU, then prints the counts, which executor ran
# what, what nothing on the GPU claims, and every sample cuda-kernels ran that did not agree.
# With SANITIZE=1 and compute-sanitizer on the PATH it reruns the cuda-kernels samples under
# compute-sanitizer (memcheck). JSON goes to $OUT (or ./gpu-out)/kernels_cuda.json.
set -euo pipefail
bin="${1:-target/release}"
only="${2:-}"
out="${OUT:-gpu-out}"
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader || true
source "$(dirname "$0")/cuda_libs.sh"
cfg="$out/plugins-kernels.toml"
cat > "$cfg" <<TOML
plugin_dirs = ["$(cd "$bin" && pwd)"]
[[executor]]
name = "cublas"
priority = 40
[[executor]]
name = "cudnn"
priority = 35
[[executor]]
name = "cuda-fuser"
priority = 30
[executor.options]
cache_dir = "${TMPDIR:-/tmp}/thunder-kernels-cache/fuser"
[[executor]]
name = "cuda-kernels"
priority = 25
[executor.options]
cache_dir = "${TMPDIR:-/tmp}/thunder-kernels-cache/kernels"
[[executor]]
name = "interpreter"
priority = 0
TOML
"$bin/thunder" --config "$cfg" plugins
status=0
args=(--config "$cfg" opinfo-check --device cuda:0 --json)
[ -n "$only" ] && args+=(--only "$only")
timeout "${OPINFO_TIMEOUT:-300}" "$bin/thunder" "${args[@]}" > "$out/kernels_cuda.json" || status=$?
python3 - "$out/kernels_cuda.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print("opinfo-check on %s: %s samples, %s; host fallbacks %d" % (r["device"], r["samples"], r["counts"], r["host_fallbacks"]))
print("executors:", r["executors"])
print("unclaimed ops:", r["unclaimed_ops"])
mine = [x for x in r["rows"] if "cuda-kernels" in x["executors"]]
agree = sum(1 for x in mine if x["outcome"] == "agree")
print("cuda-kernels ran %d samples, %d agree" % (len(mine), agree))
bad = [x for x in r["rows"] if x["outcome"] in ("differ", "failed")]
for x in bad[:60]:
    print("  %s %s [%s]: %s" % (x["sample"], x["outcome"], "+".join(x["executors"]), x["detail"][:300]))
PY
# Device-side errors must come back as errors naming the op, never a crash.
cat > "$out/take_oob.trace" <<'T'
def computation(x, i):
  # x: "cpu f32[1, 4]"
  # i: "cpu i64[3]"
  t0 = prims.take(x, i, 0)
  return (t0,)
T
cat > "$out/div_zero.trace" <<'T'
def computation(x, y):
  # x: "cpu i32[4]"
  # y: "cpu i32[4]"
  t0 = prims.floor_divide(x, y)
  return (t0,)
T
cat > "$out/rem_zero.trace" <<'T'
def computation(x, y):
  # x: "cpu i16[4]"
  # y: "cpu i16[4]"
  t0 = prims.remainder(x, y)
  return (t0,)
T
# A negative literal exponent is refused at trace time; a tensor of -1 reaches the kernel.
cat > "$out/pow_neg.trace" <<'T'
def computation(x, y):
  # x: "cpu i64[3]"
  # y: "cpu i64[3]"
  t0 = prims.neg(y)
  t1 = prims.pow(x, t0)
  return (t1,)
T
for p in "take_oob -i x=randn:f32[1,4] -i i=ones:i64[3]" "div_zero -i x=ones:i32[4] -i y=zeros:i32[4]" "rem_zero -i x=ones:i16[4] -i y=zeros:i16[4]" "pow_neg -i x=ones:i64[3] -i y=ones:i64[3]"; do
  set -- $p
  name=$1; shift
  if "$bin/thunder" --config "$cfg" run "$out/$name.trace" "$@" --device cuda:0 --out "$out" --print-trace > "$out/$name.log" 2>&1; then
    echo "error probe $name: UNEXPECTEDLY SUCCEEDED"; status=1
  else
    echo "error probe $name: failed as expected: $(grep -i 'cuda-kernels' "$out/$name.log" | head -2)"
  fi
done
if [ "${SANITIZE:-0}" = 1 ] && command -v compute-sanitizer >/dev/null; then
  # The prims the library ran (their samples are the smallest programs that reach each kernel).
  ops=$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(",".join(sorted({x["sample"].split("/")[0] for x in r["rows"] if "cuda-kernels" in x["executors"] and x["sample"].startswith("prims.")})))' "$out/kernels_cuda.json")
  echo "compute-sanitizer memcheck over: $ops"
  timeout "${SANITIZE_TIMEOUT:-90}" compute-sanitizer --tool memcheck --print-limit 20 "$bin/thunder" --config "$cfg" opinfo-check --device cuda:0 --only "$ops" > "$out/sanitizer.log" 2>&1 || echo "sanitizer exit $?"
  grep -E "ERROR SUMMARY|Invalid|opinfo-check on" "$out/sanitizer.log" | head -20
fi
exit $status
