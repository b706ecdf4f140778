#!/usr/bin/env bash
# Issue 17, cuBLAS operand layouts (executors/cublas/src/layout.rs), one device call:
#  1. every matmul / bmm / linear OpInfo sample on cuda:0 against the interpreter, and their
#     gradient fixtures (tests/fixtures/grads, the matmul and linear cases: their backward
#     reads transposed operands and writes transposed weight gradients);
#  2. the GPT-2 block (f32, B2 T128) forward with `examine` and its gradients against the
#     interpreter on the CPU;
#  3. the GPT-2 block fwd+bwd bf16 B8 T1024 beside eager and torch.compile
#     (gpt2_block_peer.py), with the time per executor, every cuBLAS region and the regions
#     that still hold a transpose; with BEFORE_DIR, the previous build's block in the same run.
# Prints PASS/FAIL per check; exits non-zero on any FAIL. Stage limits (OPINFO_S 120, CHECK_S 150,
# BLOCK_S 120 each block run) keep one call under the device's 10 minutes.
# Build as scripts/gpu/wave_check.sh says (a release `thunder` and the plugins' .so in one
# folder), then on the device with carry [".gpu-bin"]:
#   bash scripts/gpu/gemm_layouts_check.sh .gpu-bin [BEFORE_DIR]
set -uo pipefail
start=$SECONDS
bin="$(cd "${1:?usage: gemm_layouts_check.sh BIN_DIR [BEFORE_DIR]}" && pwd)"
before="${2:-}"
[ -n "$before" ] && before="$(cd "$before" && pwd)"
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
out="${OUT:-gpu-out}"; mkdir -p "$out"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
source "$here/cuda_libs.sh"
cfg="$out/plugins-layouts.toml"
bash "$here/gpu_config.sh" "$bin" "${TMPDIR:-/tmp}/thunder-layouts-kernel-cache" > "$cfg"
fails=0
verdict() { if [ "$1" -eq 0 ]; then echo "PASS $2"; else echo "FAIL $2 (status $1)"; fails=$((fails + 1)); fi; }

echo "== 1. matmul, bmm and linear samples and gradients on cuda:0 vs the interpreter =="
grads="$(mktemp -d)"
python3 - "$repo/tests/fixtures/grads" "$grads" <<'PY'
import json, os, sys
src, dst = sys.argv[1:]
cases = [c for c in json.load(open(os.path.join(src, "manifest.json"))) if c["op"] in ("matmul", "linear", "bmm")]
for f in {c["file"] for c in cases}:
    os.symlink(os.path.join(src, f), os.path.join(dst, f))
json.dump(cases, open(os.path.join(dst, "manifest.json"), "w"), indent=1)
print(f"{len(cases)} gradient cases: " + ", ".join(sorted({c['op'] for c in cases})))
PY
timeout "${OPINFO_S:-120}" "$bin/thunder" --config "$cfg" opinfo-check --device cuda:0 \
  --only prims.matmul,ltorch.matmul,ltorch.bmm,ltorch.linear,ltorch.scaled_dot_product_attention \
  --grads "$grads" 2>&1 | tee "$out/layouts_opinfo.txt" | tail -25
verdict "${PIPESTATUS[0]}" "opinfo-check matmul/bmm/linear/sdpa samples + matmul/linear gradients on cuda:0"

echo "== 2. GPT-2 block f32 B2 T128 on cuda:0 vs the interpreter =="
timeout "${CHECK_S:-150}" python3 "$here/gemm_layouts_check.py" --bin "$bin" --config "$cfg" --check
verdict $? "GPT-2 block forward and gradients (f32) on cuda:0"

echo "== 3. GPT-2 block fwd+bwd bf16 B8 T1024 =="
timeout "${BLOCK_S:-120}" python3 "$here/gpt2_block_peer.py" --bin "$bin" --config "$cfg" --dtype bf16 \
  --json "$out/layouts_block.json" 2>&1 | tee "$out/layouts_block.txt"
verdict "${PIPESTATUS[0]}" "GPT-2 block bf16 bench"
[ -f "$out/layouts_block.json" ] && python3 "$here/gemm_layouts_check.py" --bin "$bin" --config "$cfg" \
  --regions "$out/layouts_block.json"
if [ -n "$before" ]; then
  echo "== 3b. the same block with BEFORE_DIR's build (same run) =="
  bash "$here/gpu_config.sh" "$before" "${TMPDIR:-/tmp}/thunder-layouts-kernel-cache-before" > "$out/plugins-before.toml"
  timeout "${BLOCK_S:-120}" python3 "$here/gpt2_block_peer.py" --bin "$before" --config "$out/plugins-before.toml" --dtype bf16 \
    --json "$out/layouts_block_before.json" 2>&1 | tee "$out/layouts_block_before.txt"
  [ -f "$out/layouts_block_before.json" ] && python3 "$here/gemm_layouts_check.py" --bin "$before" \
    --config "$out/plugins-before.toml" --regions "$out/layouts_block_before.json"
fi
rm -rf "$grads"
echo "gemm_layouts_check: $fails failed check(s), $(( SECONDS - start )) s"
exit $(( fails > 0 ))
