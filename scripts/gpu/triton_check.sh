#!/usr/bin/env bash
# Triton-kernel checks for the lent GPU machine (no cargo there). Build here with
#   cargo build --release && mkdir -p .gpu-bin && cp target/release/thunder target/release/*.so .gpu-bin/
# (add `/.gpu-bin/` to .git/info/exclude), then run on the device with carry [".gpu-bin"]:
#   bash scripts/gpu/triton_check.sh .gpu-bin
# Needs `thunder triton-check` (thunder-cli/src/commands/triton_check.rs) wired into the CLI.
# It runs one sample per shipped kernel package through the triton executor alone against the
# interpreter, times attention (B8 H12 T1024 D64 bf16) and RMSNorm (8192x4096 bf16, against the
# cuda-fuser), then PyTorch's scaled_dot_product_attention on the same shapes in the same run,
# and prints the ratios. Full JSON goes to $OUT (or ./gpu-out).
set -euo pipefail
bin="${1:-target/release}"
out="${OUT:-gpu-out}"
repo="$(cd "$(dirname "$0")/../.." && pwd)"
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader || true
source "$(dirname "$0")/cuda_libs.sh"
cfg="$out/plugins.toml"
# The packages' path is baked into the plugin at build time; name the copy in this checkout
# explicitly so a build from another path still finds them.
cat > "$cfg" <<TOML
plugin_dirs = ["$(cd "$bin" && pwd)"]
[[executor]]
name = "triton"
priority = 50
[executor.options]
bundled = false
kernel_dirs = "$repo/executors/triton/kernels"
[[executor]]
name = "cublas"
priority = 40
[[executor]]
name = "cuda-fuser"
priority = 30
[executor.options]
cache_dir = "$out/kernel-cache"
[[executor]]
name = "interpreter"
priority = 0
TOML
"$bin/thunder" --config "$cfg" plugins
set +e
"$bin/thunder" --config "$cfg" triton-check --json > "$out/thunder_triton.json"
status=$?
set -e
cat "$out/thunder_triton.json"
python3 "$(dirname "$0")/triton_torch_peer.py" --thunder "$out/thunder_triton.json" --json "$out/torch_triton.json"
exit $status
