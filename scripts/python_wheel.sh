#!/usr/bin/env bash
# Builds the thunder_rs wheel (python/) with the executor plugins inside it.
#
#   scripts/python_wheel.sh [OUT_DIR]        # default: target/wheels
#
# Needs cargo and maturin (`pip install maturin`; MATURIN=path to choose one). The plugins
# (every default executor, CUDA ones included: they load everywhere and report "unavailable"
# without a GPU) are built in release mode and copied to python/python/thunder_rs/plugins/,
# which the wheel ships next to the extension with a plugins.toml pointing there.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out="${1:-$root/target/wheels}"
maturin="${MATURIN:-maturin}"
cd "$root"

command -v "$maturin" >/dev/null 2>&1 || {
  echo "python_wheel: maturin not found (pip install maturin, or set MATURIN=/path/to/maturin)" >&2
  exit 1
}

plugins=(interpreter cpu-simd cuda-fuser cuda-kernels cublas cudnn triton)
cargo build --release $(printf -- '-p thunder-%s ' "${plugins[@]}")

dest=python/python/thunder_rs/plugins
mkdir -p "$dest"
rm -f "$dest"/*.so
for p in "${plugins[@]}"; do
  lib="target/release/libthunder_${p//-/_}.so"
  [ -f "$lib" ] || { echo "python_wheel: $lib was not built" >&2; exit 1; }
  install -m 0644 "$lib" "$dest/"
done

rm -f "$out"/thunder_rs-*.whl
"$maturin" build --release -m python/Cargo.toml -o "$out"
# The extension is in the wheel now; left in target/release, where the default plugins.toml looks
# for executors, every `thunder` run would warn that it cannot load it as a plugin.
rm -f target/release/lib_native.so
ls "$out"/thunder_rs-*.whl
