#!/usr/bin/env bash
# CUDA checks for the lent GPU machine (no cargo there): build here with
#   cargo build --release && mkdir -p .gpu-bin && cp target/release/thunder target/release/*.so .gpu-bin/
# (add `/.gpu-bin/` to .git/info/exclude), then run on the device with carry [".gpu-bin"]:
#   bash scripts/gpu/check.sh .gpu-bin
# It runs the cuda-fuser differential samples against the interpreter, the CUDA benchmarks,
# and PyTorch on the same shapes in the same run, and prints one table; then the cuda-kernels
# library's OpInfo samples against the interpreter (kernels_check.sh). Full JSON goes to
# $OUT (or ./gpu-out) as thunder_gpu.json and torch_gpu.json.
set -euo pipefail
bin="${1:-target/release}"
out="${OUT:-gpu-out}"
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
source "$(dirname "$0")/cuda_libs.sh"
cfg="$out/plugins.toml"
cat > "$cfg" <<TOML
plugin_dirs = ["$(cd "$bin" && pwd)"]
[[executor]]
name = "cublas"
priority = 40
[[executor]]
name = "cuda-fuser"
priority = 30
[executor.options]
cache_dir = "$out/kernel-cache"
[[executor]]
name = "cuda-kernels"
priority = 25
[executor.options]
cache_dir = "$out/kernel-cache-lib"
[[executor]]
name = "interpreter"
priority = 0
TOML
"$bin/thunder" --config "$cfg" plugins
set +e
"$bin/thunder" --config "$cfg" gpu-check --json > "$out/thunder_gpu.json"
status=$?
set -e
python3 "$(dirname "$0")/torch_cuda_peer.py" --thunder "$out/thunder_gpu.json" --json "$out/torch_gpu.json"
# The kernel library's OpInfo samples on cuda:0 against the interpreter, and its device errors.
bash "$(dirname "$0")/kernels_check.sh" "$bin" "$(cat "$(dirname "$0")/kernels_ops.txt")" || status=$?
exit $status
