#!/usr/bin/env bash
# The CPU numbers of issues 20 and 19 on the device host, 2 pinned cores (the build machine is
# shared, so its ratios move with the load): `thunder bench` (copy floor, chains, tanh4, sgemm,
# cached call, MLP step, GPT-2 block fwd+bwd) beside PyTorch on the same cores, then the ONNX
# models against ONNX Runtime (onnx_cpu_peer.sh). Build as scripts/gpu/wave_check.sh says, then
# on the device with carry [".gpu-bin"]:  bash scripts/gpu/cpu_quiet.sh .gpu-bin
# CORES=2,3 picks the cores, ONLY=minilm,gpt2,resnet50 the ONNX models, SKIP_ONNX=1 skips them.
set -uo pipefail
source "$(dirname "$0")/cpu_config.sh"
bin="$(cd "${1:-.gpu-bin}" && pwd)"
out="${OUT:-gpu-out}"
cores="${CORES:-2,3}"
here="$(dirname "$0")"
mkdir -p "$out"
cfg="$out/plugins-cpu.toml"
cpu_config "$bin" "$cfg"
status=0
echo "== cores $cores: $(lscpu | sed -n 's/^Model name: *//p')"
taskset -c "$cores" "$bin/thunder" --config "$cfg" bench --json --min-time 1 > "$out/cpu_bench.json" || status=$?
taskset -c "$cores" python3 benches/peer/torch_peer.py --sections issue7 --issue7-threads 2 \
  --issue7-min-time 1 --thunder-bench "$out/cpu_bench.json" || status=$?
if [ -z "${SKIP_ONNX:-}" ]; then
  CORES="$cores" bash "$here/onnx_cpu_peer.sh" "$bin" || status=$?
fi
exit $status
