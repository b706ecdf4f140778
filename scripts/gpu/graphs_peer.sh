#!/usr/bin/env bash
# CUDA-graph replay on the GPU, in one time-boxed call (BUDGET seconds, default 540): the checks
# of graphs_check.py, the CUDA tests of the Python package, then the GPT-2 small bf16 training
# step with replay on and off beside eager and torch.compile (host time per step for each).
# Build as scripts/gpu/wave_check.sh says; on the device with carry [".gpu-bin"]:
#   bash scripts/gpu/graphs_peer.sh .gpu-bin
set -uo pipefail
here="$(dirname "$0")"
source "$here/call_setup.sh" "$@"
cache="${TMPDIR:-/tmp}/thunder-graphs-kernel-cache"
cfg="${TMPDIR:-/tmp}/plugins-graphs.toml"
bash "$here/gpu_config.sh" "$bin" "$cache" > "$cfg"
export THUNDER_CONFIG="$cfg"
python3 -m pip install --no-deps --no-index --force-reinstall --quiet --target /tmp/thunder-graphs-py "$bin"/thunder_rs-*.whl \
  && export PYTHONPATH="/tmp/thunder-graphs-py:${PYTHONPATH:-}"
status=0
stage() { echo; echo "=== $1 ($(left) s left)"; }

stage "1. graphs_check.py"
timeout "$(cap 150)" python3 "$here/graphs_check.py" || status=$?

stage "2. the Python package's CUDA tests"
timeout "$(cap 120)" python3 -m pytest -q -x "$here/../../python/tests/test_cuda.py" 2>&1 | tail -5 || status=$?

stage "3. GPT-2 small training step, bf16 B8 T1024: graphs on / off, eager, torch.compile"
timeout "$(cap 300)" python3 "$here/gpt2_train_peer.py" --config small --batch 8 --seq 1024 \
  --dtype bf16 --peers "${PEERS:-thunder,thunder-nographs,eager,compile}" \
  --json "$out/gpt2_train_graphs.json" || status=$?

echo "graphs_peer: $(( SECONDS - start )) s, status $status"
exit $status
