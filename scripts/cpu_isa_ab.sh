#!/usr/bin/env bash
# Issue 20's CPU table on this machine, at its own ISA and as an AVX2-only machine would run it,
# with PyTorch beside in the same run (torch limited to AVX2 too for the AVX2 rows).
#
#   bash scripts/cpu_isa_ab.sh OUT_DIR [BASE_PLUGIN_DIR [BASE_THUNDER]] [ROUNDS]
#
# Builds the cpu-simd plugin a second time without the `gemm` crate's AVX-512 kernels
# (`--no-default-features`, in target/avx2) and runs it with THUNDER_CPU_SIMD_ISA=avx2, which
# is what an AVX2 machine gets. BASE_PLUGIN_DIR (with BASE_THUNDER, its CLI) is an older build
# to compare against under the same AVX2 limits ("no slower than now on an AVX2 machine").
# Rounds alternate the builds so drifting load touches each alike.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?OUT_DIR}
base_dir=${2:-}
base_bin=${3:-}
rounds=${4:-3}
py=${PYTHON:-/work/venv/bin/python}
mkdir -p "$out/avx2-bin"
export CARGO_INCREMENTAL=0
cargo build --release -p thunder-cli -p thunder-cpu-simd -p thunder-interpreter
CARGO_TARGET_DIR=target/avx2 cargo build --release -p thunder-cpu-simd --no-default-features
cp target/avx2/release/libthunder_cpu_simd.so target/release/libthunder_interpreter.so "$out/avx2-bin/"
config() { # name plugin_dir
  cat > "$out/$1.toml" <<TOML
plugin_dirs = ["$(realpath "$2")"]
[[executor]]
name = "cpu-simd"
priority = 20
enabled = true
requires = "^0.1"
[[executor]]
name = "interpreter"
priority = 0
enabled = true
requires = "^0.1"
TOML
}
config native target/release
config avx2 "$out/avx2-bin"
[ -n "$base_dir" ] && config base "$base_dir"
lscpu | grep -E "Model name|Flags" > "$out/cpu.txt"
for r in $(seq 1 "$rounds"); do
  target/release/thunder --config "$out/native.toml" bench --json --min-time 1 > "$out/native_$r.json"
  THUNDER_CPU_SIMD_ISA=avx2 target/release/thunder --config "$out/avx2.toml" bench --json --min-time 1 \
    > "$out/avx2_$r.json"
  if [ -n "$base_dir" ]; then
    THUNDER_CPU_SIMD_ISA=avx2 "$base_bin" --config "$out/base.toml" bench --json --min-time 1 \
      > "$out/base_$r.json"
  fi
done
"$py" benches/peer/torch_peer.py --sections issue7 --issue7-threads 2 --issue7-min-time 1 \
  --thunder-bench "$out/native_$rounds.json" > "$out/torch_native.txt" 2>&1
ATEN_CPU_CAPABILITY=avx2 MKL_ENABLE_INSTRUCTIONS=AVX2 ONEDNN_MAX_CPU_ISA=AVX2 \
  "$py" benches/peer/torch_peer.py --sections issue7 --issue7-threads 2 --issue7-min-time 1 \
  --thunder-bench "$out/avx2_$rounds.json" > "$out/torch_avx2.txt" 2>&1
"$py" - "$out" <<'PY'
import glob, json, os, statistics, sys
out = sys.argv[1]
rows = {}
for f in sorted(glob.glob(os.path.join(out, "*_[0-9]*.json"))):
    build = os.path.basename(f).rsplit("_", 1)[0]
    for r in json.load(open(f))["results"]:
        rows.setdefault(r["name"], {}).setdefault(build, []).append(r)
def show(rs):
    vals = [r["value"] for r in rs]
    unit = rs[0]["unit"]
    return f"{statistics.median(vals):10.2f} {unit} ({', '.join(f'{v:.1f}' for v in vals)})"
for name, builds in rows.items():
    print(name)
    for b, rs in builds.items():
        print(f"  {b:7} {show(rs)}")
PY
