#!/usr/bin/env bash
# Row kernels by kernel time (rows_kernels.py) with the thunder_rs wheel of build folder $1;
# extra arguments go to the script. On the device with carry [".gpu-bin"]:
#   bash scripts/gpu/rows_kernels.sh .gpu-bin --kernels --json gpu-out/rows_kernels.json
set -uo pipefail
bin="$(cd "${1:-.gpu-bin}" && pwd)"
shift || true
here="$(dirname "$0")"
source "$here/cuda_libs.sh"
cache="${TMPDIR:-/tmp}/thunder-rows-kernel-cache-$$"
cfg="${TMPDIR:-/tmp}/plugins-rows.toml"
bash "$here/gpu_config.sh" "$bin" "$cache" > "$cfg"
export THUNDER_CONFIG="$cfg"
py="${TMPDIR:-/tmp}/thunder-rows-py-$$"
python3 -m pip install --no-deps --no-index --force-reinstall --quiet --target "$py" "$bin"/thunder_rs-*.whl \
  && export PYTHONPATH="$py:${PYTHONPATH:-}"
python3 "$here/rows_kernels.py" "$@"
