#!/usr/bin/env bash
# Whole training programs on the lent GPU machine (no cargo there). Build here with
#   cargo build --release && mkdir -p .gpu-bin && cp target/release/thunder target/release/*.so .gpu-bin/
# then run on the device with carry [".gpu-bin"]:
#   bash scripts/gpu/e2e.sh .gpu-bin
# It runs every OpInfo sample on cuda:0 against the interpreter (thunder opinfo-check), an MLP,
# a CNN and a GPT-2 block forward and backward on cuda:0 against PyTorch (scripts/gpu/e2e.py),
# then the digits demo on cuda:0 (E2E_PROGRAMS=0 skips these two), then the gradient samples
# (tests/fixtures/grads differentiated on cuda:0 against the interpreter), then every OpInfo
# sample. Every executor but the CPU ones is
# listed, so a region left to the CPU shows up as a host fallback in the report.
set -euo pipefail
bin="${1:-target/release}"
out="${OUT:-gpu-out}"
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader || true
source "$(dirname "$0")/cuda_libs.sh"
cfg="$out/plugins-e2e.toml"
bash "$(dirname "$0")/gpu_config.sh" "$bin" "${TMPDIR:-/tmp}/thunder-e2e-kernel-cache" > "$cfg"
"$bin/thunder" --config "$cfg" plugins
status=0
if [ "${E2E_PROGRAMS:-1}" != 0 ]; then
  python3 "$(dirname "$0")/e2e.py" --bin "$bin" --config "$cfg" --json "$out/e2e.json" || status=$?
  "$bin/thunder" --config "$cfg" demo --device cuda:0 --quiet || status=$?
fi
# The gradient samples: every case of tests/fixtures/grads differentiated on cuda:0.
timeout "${GRADS_TIMEOUT:-300}" "$bin/thunder" --config "$cfg" opinfo-check --device cuda:0 --no-samples --grads tests/fixtures/grads --json > "$out/opinfo_grads_cuda.json" || status=$?
python3 - "$out/opinfo_grads_cuda.json" <<'PY' || status=1
import json, sys
g = json.load(open(sys.argv[1]))["grads"]
print("gradient samples on cuda:0: %s cases, %s; host fallbacks %d" % (g["cases"], g["counts"], g["host_fallbacks"]))
print("executors:", g["executors"])
print("unclaimed ops:", g["unclaimed_ops"])
bad = [x for x in g["rows"] if x["outcome"] in ("differ", "failed")]
for x in bad[:40]:
    print("  %s %s: %s" % (x["case"], x["outcome"], x["detail"][:160]))
PY
# Every OpInfo sample on cuda:0 against the interpreter on the CPU (summary here, rows in JSON).
timeout "${OPINFO_TIMEOUT:-420}" "$bin/thunder" --config "$cfg" opinfo-check --device cuda:0 --no-grads --json > "$out/opinfo_cuda.json" || status=$?
python3 - "$out/opinfo_cuda.json" <<'PY' || status=1
import json, sys
r = json.load(open(sys.argv[1]))
print("opinfo-check on %s: %s samples, %s; host fallbacks %d" % (r["device"], r["samples"], r["counts"], r["host_fallbacks"]))
print("executors:", r["executors"])
print("unclaimed ops:", r["unclaimed_ops"])
bad = [x for x in r["rows"] if x["outcome"] in ("differ", "failed")]
for x in bad[:40]:
    print("  %s %s: %s" % (x["sample"], x["outcome"], x["detail"][:160]))
PY
exit $status
