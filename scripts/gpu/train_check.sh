#!/usr/bin/env bash
# Issue 17's numbers in one time-boxed call (BUDGET seconds, default 540): attention's flash
# pair on cuda:0 against the interpreter, the GPT-2 block fwd+bwd with its region breakdown and
# the rest of GPT-2 (embedding, LM head, loss) with its own,
# the GPT-2 small bf16 training step beside eager and torch.compile with peak memory, and the
# step's first call with a cold kernel cache, then again with the cache warm (a fresh process).
# Build as scripts/gpu/wave_check.sh says; on the device with carry [".gpu-bin"]:
#   bash scripts/gpu/train_check.sh .gpu-bin
set -uo pipefail
here="$(dirname "$0")"
source "$here/call_setup.sh" "$@"
cache="${TMPDIR:-/tmp}/thunder-train-kernel-cache-$$"
rm -rf "$cache"
cfg="${TMPDIR:-/tmp}/plugins-train.toml"
bash "$here/gpu_config.sh" "$bin" "$cache" > "$cfg"
export THUNDER_CONFIG="$(cd "$(dirname "$cfg")" && pwd)/$(basename "$cfg")"
python3 -m pip install --no-deps --no-index --force-reinstall --quiet --target /tmp/thunder-train-py "$bin"/thunder_rs-*.whl \
  && export PYTHONPATH="/tmp/thunder-train-py:${PYTHONPATH:-}"
status=0
stage() { echo; echo "=== $1 ($(left) s left)"; }

stage "1. attention ops on cuda:0 against the interpreter"
timeout "$(cap 60)" "$bin/thunder" --config "$cfg" opinfo-check --device cuda:0 \
  --only ltorch.scaled_dot_product_attention,ltorch.sdpa_fwd_lse,ltorch.sdpa_bwd --no-grads \
  | grep -vE "^\S+ +(WARN|INFO)" | tail -12 || status=$?
if [ -n "${EXTRA:-}" ]; then
  stage "1b. extra: $EXTRA"
  timeout "$(cap "${EXTRA_S:-120}")" bash -c "$EXTRA" || status=$?
fi

stage "2. GPT-2 block fwd+bwd, bf16 B8 T1024 C768"
timeout "$(cap 120)" python3 "$here/gpt2_block_peer.py" --bin "$bin" --config "$cfg" \
  --json "$out/gpt2_block_bench.json" || status=$?

stage "2b. GPT-2 small outside the blocks: embedding, final norm, LM head, cross-entropy"
timeout "$(cap 90)" python3 "$here/gpt2_head_peer.py" --bin "$bin" --config "$cfg" \
  --json "$out/gpt2_head_bench.json" || status=$?

stage "3. GPT-2 small training step, bf16 B8 T1024 (thunder first: cold kernel cache)"
timeout "$(cap 200)" python3 "$here/gpt2_train_peer.py" --config small --batch 8 --seq 1024 \
  --dtype bf16 --peers "${PEERS:-thunder,eager,compile}" --json "$out/gpt2_train_step.json" || status=$?

stage "4. the same thunder step again, warm kernel cache"
timeout "$(cap 90)" python3 "$here/gpt2_train_peer.py" --config small --batch 8 --seq 1024 \
  --dtype bf16 --peers thunder --reps 5 --json "$out/gpt2_train_step_warm.json" || status=$?

echo "train_check: $(( SECONDS - start )) s, status $status"
exit $status
