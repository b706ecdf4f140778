#!/usr/bin/env bash
# Issue 17, cross-entropy as a fused op pair on cuda:0 (cuda-kernels runs
# ltorch.cross_entropy_lse / ltorch.cross_entropy_bwd with the bf16<->f32 converts around them),
# in one time-boxed call (BUDGET seconds, default 540):
#  1. the OpInfo samples of cross_entropy and of the pair on cuda:0 against the interpreter;
#  2. ce_peer.py: nanoGPT's loss and edge cases (odd V, ignored rows, all rows ignored, one
#     row, one class, f16 / f32 logits, i32 targets, an out-of-range target) through
#     `thunder run --grad` against torch, then the loss alone at [8192, 50304] beside eager;
#  3. gpt2_head_peer.py: GPT-2's head (embedding, final norm, LM head, loss) with its regions;
#  4. the gradient samples on cuda:0 (tests/fixtures/grads has no cross-entropy case: the
#     pair's gradients are checked against torch in stage 2), with the time left.
# Build as scripts/gpu/wave_check.sh says; on the device with carry [".gpu-bin"]:
#   bash scripts/gpu/ce_check.sh .gpu-bin
set -uo pipefail
here="$(dirname "$0")"
source "$here/call_setup.sh" "$@"
cache="${TMPDIR:-/tmp}/thunder-ce-kernel-cache-$$"
rm -rf "$cache"
cfg="$out/plugins-ce.toml"
bash "$here/gpu_config.sh" "$bin" "$cache" > "$cfg"
export THUNDER_CONFIG="$(cd "$(dirname "$cfg")" && pwd)/$(basename "$cfg")"
status=0
stage() { echo; echo "=== $1 ($(left) s left)"; }

stage "1. cross-entropy OpInfo samples on cuda:0 against the interpreter"
timeout "$(cap 120)" "$bin/thunder" --config "$cfg" opinfo-check --device cuda:0 \
  --only ltorch.cross_entropy,ltorch.cross_entropy_lse,ltorch.cross_entropy_bwd --no-grads \
  | tail -8 || status=$?

stage "2. nanoGPT's loss and edge cases against torch; the loss alone beside eager"
timeout "$(cap 180)" python3 "$here/ce_peer.py" --bin "$bin" --config "$cfg" \
  --json "$out/ce_bench.json" || status=$?

stage "3. GPT-2 small outside the blocks: embedding, final norm, LM head, cross-entropy"
timeout "$(cap 120)" python3 "$here/gpt2_head_peer.py" --bin "$bin" --config "$cfg" \
  --json "$out/gpt2_head_bench.json" || status=$?

stage "4. the gradient samples on cuda:0 (every op's fixtures; ce_peer.py checked the pair's)"
timeout "$(cap 300)" "$bin/thunder" --config "$cfg" opinfo-check --device cuda:0 --no-samples \
  --grads tests/fixtures/grads | tail -8 || status=$?

echo "ce_check: $(( SECONDS - start )) s, status $status"
exit $status
