#!/usr/bin/env bash
# Prints a plugins.toml that loads the executors from folder $1 with every GPU executor first,
# then the CPU ones (so a region left to the CPU shows up as a host fallback in a report).
# $2: the cuda-fuser kernel cache folder.
set -euo pipefail
bin="$(cd "${1:?usage: gpu_config.sh BIN_DIR [CACHE_DIR]}" && pwd)"
cache="${2:-${TMPDIR:-/tmp}/thunder-gpu-kernel-cache}"
# The packages' path is baked into the plugin at build time (this machine's checkout); name the
# copy in the checkout running this script.
repo="$(cd "$(dirname "$0")/../.." && pwd)"
# Symbols the Triton executor is not asked about (plugins.toml's `skip`), as in the repo's
# plugins.toml; TRITON_SKIP= (empty) asks it about everything (triton-check; builds before
# the `skip` key existed, which reject it: TRITON_SKIP=none leaves the key out).
skip_list="${TRITON_SKIP-ltorch.rms_norm}"
skip=""
for s in ${skip_list//,/ }; do skip+="${skip:+, }\"$s\""; done
skip_line="skip = [$skip]"
[ "$skip_list" = none ] && skip_line=""
cat <<TOML
plugin_dirs = ["$bin"]
[[executor]]
name = "triton"
priority = 50
$skip_line
[executor.options]
bundled = false
kernel_dirs = "$repo/executors/triton/kernels"
[[executor]]
name = "cublas"
priority = 40
[[executor]]
name = "cudnn"
priority = 35
[[executor]]
name = "cuda-fuser"
priority = 30
[executor.options]
cache_dir = "$cache"
[[executor]]
name = "cuda-kernels"
priority = 25
[[executor]]
name = "cpu-simd"
priority = 20
[[executor]]
name = "interpreter"
priority = 0
TOML
