#!/usr/bin/env bash
# Host-time profile of the GPT-2 small bf16 training step, thunder beside eager
# (scripts/gpu/step_profile.py). On the device with carry [".gpu-bin"]:
#   bash scripts/gpu/profile_check.sh .gpu-bin [more step_profile.py arguments]
set -uo pipefail
bin="$(cd "${1:-.gpu-bin}" && pwd)"
shift || true
out="${OUT:-gpu-out}"
mkdir -p "$out"
here="$(dirname "$0")"
source "$here/cuda_libs.sh"
cfg="$out/plugins-profile.toml"
bash "$here/gpu_config.sh" "$bin" "${TMPDIR:-/tmp}/thunder-profile-kernel-cache" > "$cfg"
export THUNDER_CONFIG="$(cd "$(dirname "$cfg")" && pwd)/$(basename "$cfg")"
python3 -m pip install --no-deps --no-index --force-reinstall --quiet --target /tmp/thunder-profile-py "$bin"/thunder_rs-*.whl \
  && export PYTHONPATH="/tmp/thunder-profile-py:${PYTHONPATH:-}"
STEP_PROFILE_TRACES="$out/step_traces.txt" python3 "$here/step_profile.py" --json "$out/step_profile.json" "$@"
