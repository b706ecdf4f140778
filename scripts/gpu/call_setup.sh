# Sourced at the top of the time-boxed GPU scripts, after `here="$(dirname "$0")"`, with the
# script's arguments: `source "$here/call_setup.sh" "$@"`. Sets `start`, `budget` (BUDGET, else
# the script's `default_budget`, else 540 seconds), `left` (seconds left) and `cap N` (N, or
# what is left less a margin), `bin` (the carried binaries, $1, default .gpu-bin) and `out`
# (OUT, default gpu-out, created); prints the GPU and puts the CUDA libraries on the path.
start=$SECONDS
budget="${BUDGET:-${default_budget:-540}}"
left() { echo $(( budget - (SECONDS - start) )); }
cap() { local l; l=$(left); echo $(( l > $1 ? $1 : (l > 5 ? l - 5 : 1) )); }
bin="$(cd "${1:-.gpu-bin}" && pwd)"
out="${OUT:-gpu-out}"
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
source "$here/cuda_libs.sh"
