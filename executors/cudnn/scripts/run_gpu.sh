#!/usr/bin/env bash
# On the lent GPU machine, from the repository root, with the built files in .gpu-cudnn:
#   bash .gpu-cudnn/run_gpu.sh
# (thunder, libthunder_{cudnn,cublas,cuda_fuser,interpreter}.so, conv_bench, gpu_check.py).
set -uo pipefail
dir="$(cd "$(dirname "$0")" && pwd)"
out="${OUT:-$dir/out}"
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader || true
# cuDNN, NVRTC and cuBLASLt from PyTorch's wheels, ahead of the toolkit's folder (one cuDNN:
# mixing the sub-libraries of two installs is CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH).
for d in /usr/local/cuda/lib64 $(python3 -c 'import nvidia, os; p = nvidia.__path__[0]; print(" ".join(os.path.join(p, x, "lib") for x in sorted(os.listdir(p)) if os.path.isdir(os.path.join(p, x, "lib"))))' 2>/dev/null); do
  export LD_LIBRARY_PATH="$d:${LD_LIBRARY_PATH:-}"
done
ls /usr/local/cuda/lib64 2>/dev/null | grep -i cudnn | tr '\n' ' '; echo
ls "$(python3 -c 'import nvidia.cudnn as c; print(c.__path__[0])')/lib" | tr '\n' ' '; echo
python3 -c 'import ctypes; l = ctypes.CDLL("libcudnn.so.9"); print("cudnnGetVersion", l.cudnnGetVersion(), "cudnnCnnVersionCheck", l.cudnnCnnVersionCheck(), "cudnnOpsVersionCheck", l.cudnnOpsVersionCheck())' || true
cfg="$out/plugins.toml"
cat > "$cfg" <<TOML
plugin_dirs = ["$dir"]
[[executor]]
name = "cublas"
priority = 40
[[executor]]
name = "cudnn"
priority = 35
[[executor]]
name = "cuda-fuser"
priority = 30
[[executor]]
name = "interpreter"
priority = 0
TOML
"$dir/thunder" --config "$cfg" plugins
status=0
timeout 200 "$dir/thunder" --config "$cfg" opinfo-check --device cuda:0 --only prims.convolution,ltorch.conv1d,ltorch.conv2d,ltorch.conv3d --json > "$out/opinfo_conv.json" || status=$?
python3 - "$out/opinfo_conv.json" <<'PY'
import json, sys
try:
    r = json.load(open(sys.argv[1]))
except Exception as e:
    print("opinfo-check: no report (%s)" % e); sys.exit(0)
print("opinfo-check conv on %s: %s samples, %s; host fallbacks %d" % (r["device"], r["samples"], r["counts"], r["host_fallbacks"]))
print("executors:", r["executors"])
print("unclaimed ops:", r["unclaimed_ops"])
ints = ("/u8/", "/i8/", "/i16/", "/i32/", "/i64/")
bad = [x for x in r["rows"] if x["outcome"] != "agree"]
print("not agreeing: %d integer samples (no GPU executor convolves integers), %d float samples" % (
    sum(1 for x in bad if any(i in x["sample"] for i in ints)), sum(1 for x in bad if not any(i in x["sample"] for i in ints))))
for x in [x for x in bad if not any(i in x["sample"] for i in ints)][:30]:
    print("  %s %s: %s" % (x["sample"], x["outcome"], x["detail"][:200]))
PY
PYTHONUNBUFFERED=1 python3 "$dir/gpu_check.py" --bin "$dir" --json "$out/cudnn_check.json" || status=$?
exit $status
