#!/usr/bin/env bash
# CPU emulation of cuda-kernels' cross-entropy kernels (no GPU): g++ (C++20) and python3.
#   bash scripts/ce_emulate/run.sh
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"
python3 "$here/gen.py" "$here/../../executors/cuda-kernels/tests/golden/cross_entropy.cu"
cp "$here/harness.cpp" .
g++ -std=c++20 -O1 -w -pthread harness.cpp -o harness
./harness
