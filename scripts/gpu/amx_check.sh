#!/usr/bin/env bash
# AMX on the GPU machine's host CPU (an Intel Xeon with AMX; issue 20): cpu-simd's bf16 product
# tests with AMX required (THUNDER_REQUIRE_AMX=1), then `thunder bench` bgemm_2048 and
# mlp_bf16_layer with AMX (default) and without (THUNDER_CPU_SIMD_AMX=0: the AVX-512-BF16
# kernel) at 2 threads and at every CPU, and PyTorch's bf16 torch.mm 2048 at the same threads.
# Build here (no GPU needed), then carry .gpu-bin:
#   cargo build --release -p thunder-cli -p thunder-cpu-simd -p thunder-interpreter
#   cp target/release/thunder target/release/libthunder_cpu_simd.so target/release/libthunder_interpreter.so .gpu-bin/
#   cp "$(cargo test --release -p thunder-cpu-simd --no-run --message-format=json | python3 scripts/gpu/test_binary.py thunder_cpu_simd)" .gpu-bin/cpu_simd_tests
#   bash scripts/gpu/amx_check.sh .gpu-bin      (on the device)
set -uo pipefail
bin="$(cd "${1:-.gpu-bin}" && pwd)"
out="${OUT:-gpu-out}"
mkdir -p "$out"
status=0
lscpu | grep -E "^Model name|^CPU\(s\)|^Thread|^Core|^Socket" || true
grep -o -w -E "amx_(tile|bf16|int8)|avx512_bf16" /proc/cpuinfo | sort -u | tr '\n' ' '; echo
echo "=== cpu-simd half_gemm tests, AMX required"
THUNDER_REQUIRE_AMX=1 "$bin/cpu_simd_tests" half_gemm 2>&1 | tail -4 || status=$?
cfg="${TMPDIR:-/tmp}/plugins-amx.toml"
printf 'plugin_dirs = ["%s"]\n' "$bin" > "$cfg"
for threads in 2 "$(nproc)"; do
  for amx in 1 0; do
    echo "=== thunder bench, $threads threads, THUNDER_CPU_SIMD_AMX=$amx"
    RAYON_NUM_THREADS=$threads THUNDER_CPU_SIMD_AMX=$amx THUNDER_EXECUTORS=cpu-simd,interpreter \
      timeout 120 "$bin/thunder" --config "$cfg" bench --only bgemm_2048,mlp_bf16_layer --json --min-time 1 \
      > "$out/bench_t${threads}_amx${amx}.json" 2> "$out/bench_t${threads}_amx${amx}.err" || status=$?
    python3 - "$out/bench_t${threads}_amx${amx}.json" <<'PY' || status=1
import json, sys
d = json.load(open(sys.argv[1]))
print("  cpu:", d["machine"]["cpu"], "isa:", " ".join(d["machine"]["isa"]))
for r in d["results"]:
    print(f"  {r['name']:16} {r['value']:10.1f} {r['unit']:8} (best {r['best']:.1f}, {r['samples']} samples)")
PY
  done
done
echo "=== PyTorch bf16 torch.mm 2048 (and the bf16 MLP layer's shapes are in benches/peer/torch_peer.py)"
for threads in 2 "$(nproc)"; do
  python3 - "$threads" <<'PY' || status=$?
import sys, time, torch
torch.set_num_threads(int(sys.argv[1]))
a = torch.randn(2048, 2048).bfloat16(); b = torch.randn(2048, 2048).bfloat16()
for _ in range(3):
    torch.mm(a, b)
ts = []
t_end = time.perf_counter() + 1.0
while time.perf_counter() < t_end or len(ts) < 5:
    t = time.perf_counter(); torch.mm(a, b); ts.append(time.perf_counter() - t)
ts.sort()
print(f"  torch {torch.__version__} {sys.argv[1]} threads: {2 * 2048**3 / ts[len(ts)//2] / 1e9:.1f} GFLOP/s "
      f"(best {2 * 2048**3 / ts[0] / 1e9:.1f}, {len(ts)} samples)")
PY
done
exit $status
