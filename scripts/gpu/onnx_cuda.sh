#!/usr/bin/env bash
# ONNX models on cuda:0 (issue 19). Build here:
#   cargo build --release && cargo build --release -p thunder-onnx --example onnx_bench
#   cp target/release/thunder target/release/*.so target/release/examples/onnx_bench .gpu-bin/
# then on the device:  bash scripts/gpu/onnx_cuda.sh .gpu-bin
# 1. every committed fixture model (tiny BERT, GPT-2, ResNet, CNN, op mixes) through
#    `thunder run model.onnx --device cuda:0` against ONNX Runtime's outputs stored beside it;
# 2. the full-size models (MiniLM, GPT-2 small, ResNet-50) timed beside ORT's CUDA provider and
#    PyTorch eager (benches/peer/onnx_peer.py --device cuda:0). ONLY=minilm,gpt2 limits 2.
set -uo pipefail
bin="$(cd "${1:-target/release}" && pwd)"
out="${OUT:-gpu-out}"
mkdir -p "$out"
source "$(dirname "$0")/cuda_libs.sh"
cfg="$out/plugins-gpu.toml"
bash "$(dirname "$0")/gpu_config.sh" "$bin" > "$cfg"
status=0
python3 - "$bin/thunder" "$cfg" "$out" "${DEVICE:-cuda:0}" <<'PY' || status=$?
import glob, os, subprocess, sys
import numpy as np
thunder, cfg, out, device = sys.argv[1:5]
fails = 0
for model in sorted(glob.glob("thunder-onnx/tests/fixtures/*/model.onnx")):
    d = os.path.dirname(model)
    for case in sorted({os.path.basename(f).split(".")[0] for f in glob.glob(f"{d}/case*.in.*.npy")}):
        ins = [f"{f.split('.in.')[1][:-4]}={f}" for f in sorted(glob.glob(f"{d}/{case}.in.*.npy"))]
        o = os.path.join(out, "onnx", os.path.basename(d), case)
        args = [thunder, "--config", cfg, "run", model, "--device", device, "--out", o]
        for i in ins:
            args += ["-i", i]
        r = subprocess.run(args, capture_output=True, text=True)
        name = f"{os.path.basename(d)}/{case}"
        if r.returncode != 0:
            fails += 1
            print(f"FAIL {name}: {r.stderr.strip().splitlines()[-1] if r.stderr.strip() else r.returncode}")
            continue
        worst = 0.0
        for want_f in sorted(glob.glob(f"{d}/{case}.out.*.npy")):
            oname = want_f.split(".out.")[1][:-4]
            got_f = os.path.join(o, f"out_{oname}.npy")
            want = np.load(want_f)
            if not os.path.exists(got_f):
                worst = float("inf")
                continue
            got = np.load(got_f)
            scale = max(float(np.abs(want.astype(np.float64)).max()) if want.size else 0.0, 1e-30)
            err = float(np.abs(got.astype(np.float64) - want.astype(np.float64)).max()) / scale if want.size else 0.0
            worst = max(worst, err)
        ok = worst <= 1e-4
        fails += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {name}: max error {worst:.1e} relative to ORT's scale")
print(f"onnx fixtures on {device}: {fails} failing")
sys.exit(1 if fails else 0)
PY
python3 benches/peer/onnx_peer.py --device cuda:0 --bin "$bin" --config "$cfg" \
  --only "${ONLY:-minilm,gpt2,resnet50}" --reps "${REPS:-20}" --work "$out/onnx_peer" || status=$?
cp "$out/onnx_peer/results.json" "$out/onnx_peer_results.json" 2>/dev/null
rm -f "$out"/onnx_peer/*.onnx "$out"/onnx_peer/*.npy
exit $status
