#!/usr/bin/env bash
# Triton-kernel checks for the lent GPU machine (no cargo there). Build here with
#   cargo build --release && bash scripts/python_wheel.sh
#   mkdir -p .gpu-bin && cp target/release/thunder target/release/*.so target/wheels/thunder_rs-*.whl .gpu-bin/
# (add `/.gpu-bin/` to .git/info/exclude), then run on the device with carry [".gpu-bin"]:
#   bash scripts/gpu/triton_check.sh .gpu-bin
# 1. `thunder triton-check`: samples of every shipped kernel package (attention inference,
#    sdpa_fwd_lse with its lse, sdpa_bwd, RMSNorm) through the triton executor alone against the
#    interpreter; times attention (B8 H12 T1024 D64 bf16: inference, sdpa_fwd_lse, sdpa_bwd) and
#    RMSNorm (8192x4096 bf16, against the cuda-fuser);
# 2. triton_torch_peer.py: PyTorch's flash attention (forward, forward+backward) and RMSNorm on the
#    same shapes, and the ratios;
# 3. attn_peer.py (needs the thunder_rs wheel in the bin folder): attention forward+backward
#    through thunder_rs.jit against PyTorch's math (out, dq, dk, dv) and timed against
#    F.scaled_dot_product_attention's flash backend in one process.
# Each part runs even when an earlier one fails; the exit status is the first failure's. Full
# JSON goes to $OUT (or ./gpu-out).
set -uo pipefail
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
status=0
fail() { [ "$status" -ne 0 ] || status=$1; }
"$bin/thunder" --config "$cfg" plugins || fail $?
echo "=== 1. thunder triton-check"
timeout 300 "$bin/thunder" --config "$cfg" triton-check --json > "$out/thunder_triton.json" || fail $?
cat "$out/thunder_triton.json"
echo "=== 2. PyTorch beside the kernels"
timeout 120 python3 "$(dirname "$0")/triton_torch_peer.py" --thunder "$out/thunder_triton.json" \
  --json "$out/torch_triton.json" || fail $?
echo "=== 3. attention training through thunder_rs vs PyTorch"
wheel=$(ls "$bin"/thunder_rs-*.whl 2>/dev/null | head -1)
if [ -n "$wheel" ] && python3 -m pip install --no-deps --no-index --force-reinstall --quiet \
     --target "$out/py" "$wheel"; then
  THUNDER_CONFIG="$(cd "$out" && pwd)/plugins.toml" PYTHONPATH="$out/py:${PYTHONPATH:-}" \
    timeout 240 python3 "$(dirname "$0")/attn_peer.py" --json "$out/attn_peer.json" || fail $?
else
  echo "no thunder_rs wheel in $bin (bash scripts/python_wheel.sh, then copy target/wheels/*.whl): skipped"
  fail 1
fi
echo "triton_check: status $status"
exit $status
