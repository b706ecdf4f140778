#!/usr/bin/env bash
# One call on the lent GPU for the whole wave, stages in order of importance, each under a time
# limit so the call ends inside the device's 10 minutes (BUDGET seconds in all, default 560).
# Build here:
#   cargo build --release && cargo build --release -p thunder-onnx --example onnx_bench
#   bash scripts/python_wheel.sh
#   mkdir -p .gpu-bin && cp target/release/thunder target/release/*.so \
#     target/release/examples/onnx_bench target/wheels/thunder_rs-*.whl .gpu-bin/
# then on the device with carry [".gpu-bin"]:  bash scripts/gpu/wave_check.sh .gpu-bin
#  1. MLP, CNN and GPT-2 block forward+backward against PyTorch (e2e.py), the digits demo;
#  2. GPT-2 small bf16 training step (B8 T1024) through thunder_rs beside eager and
#     torch.compile, with peak memory (gpt2_train_peer.py);
#  3. 200 training steps of a small GPT on Shakespeare, eager and thunder from one init;
#  4. ONNX fixtures on cuda:0 against ORT, and the full-size models beside ORT/torch eager;
#  5. the gradient samples and every OpInfo sample on cuda:0 against the interpreter.
set -uo pipefail
default_budget=560
here="$(dirname "$0")"
source "$here/call_setup.sh" "$@"
cfg="$out/plugins-gpu.toml"
bash "$here/gpu_config.sh" "$bin" "${TMPDIR:-/tmp}/thunder-wave-kernel-cache" > "$cfg"
export THUNDER_CONFIG="$(cd "$(dirname "$cfg")" && pwd)/$(basename "$cfg")"
python3 -m pip install --no-deps --no-index --force-reinstall --quiet --target "$out/py" "$bin"/thunder_rs-*.whl \
  && export PYTHONPATH="$out/py:${PYTHONPATH:-}"
status=0
stage() { echo; echo "=== $1 ($(left) s left)"; }
stage "1. e2e programs and demo"
timeout 90 python3 "$here/e2e.py" --bin "$bin" --config "$cfg" --json "$out/e2e.json" || status=$?
timeout 30 "$bin/thunder" --config "$cfg" demo --device cuda:0 --quiet || status=$?
stage "2. GPT-2 small training step"
timeout $(( $(left) > 200 ? 200 : $(left) )) python3 "$here/gpt2_train_peer.py" --config small --batch 8 --seq 1024 \
  --dtype bf16 --json "$out/gpt2_train_step.json" || status=$?
stage "3. learning curves"
timeout $(( $(left) > 120 ? 120 : $(left) )) python3 "$here/gpt2_train_peer.py" --learn --steps 200 --dtype bf16 \
  --json "$out/gpt2_learn_curves.json" || status=$?
stage "4. ONNX on cuda:0"
OUT="$out" ONLY="${ONNX_ONLY:-gpt2,resnet50}" REPS=10 timeout $(( $(left) > 150 ? 150 : $(left) )) \
  bash "$here/onnx_cuda.sh" "$bin" || status=$?
stage "5. gradient and OpInfo samples"
if [ "$(left)" -gt 20 ]; then
  timeout $(( $(left) / 3 )) "$bin/thunder" --config "$cfg" opinfo-check --device cuda:0 --no-samples \
    --grads tests/fixtures/grads --json > "$out/opinfo_grads_cuda.json" || status=$?
fi
if [ "$(left)" -gt 20 ]; then
  timeout $(( $(left) - 5 )) "$bin/thunder" --config "$cfg" opinfo-check --device cuda:0 --no-grads \
    --json > "$out/opinfo_cuda.json" || status=$?
fi
python3 - "$out" <<'PY'
import json, os, sys
out = sys.argv[1]
for name, key in (("opinfo_grads_cuda.json", "grads"), ("opinfo_cuda.json", None)):
    p = os.path.join(out, name)
    try:
        r = json.load(open(p))
    except Exception as e:  # noqa: BLE001 (a stage cut off by its time limit writes nothing)
        print(f"{name}: no result ({e.__class__.__name__})")
        continue
    r = r[key] if key else r
    n = r.get("cases", r.get("samples"))
    print(f"{name}: {n}, {r['counts']}, host fallbacks {r['host_fallbacks']}")
    for x in [x for x in r["rows"] if x["outcome"] in ("differ", "failed")][:30]:
        print("  %s %s: %s" % (x.get("case", x.get("sample")), x["outcome"], x["detail"][:160]))
PY
echo "wave_check: $(( SECONDS - start )) s, status $status"
exit $status
