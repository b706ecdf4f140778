#!/usr/bin/env bash
# Correctness of a build on cuda:0 in one time-boxed call (BUDGET seconds, default 540): every
# Triton package against the interpreter in f32, the 200-step learning run (eager and thunder
# from one initialisation, flash attention and recomputed residuals included), then the
# gradient samples and every OpInfo sample on cuda:0 against the interpreter.
# Build as scripts/gpu/wave_check.sh says; on the device:  bash scripts/gpu/correctness_check.sh .gpu-bin
set -uo pipefail
here="$(dirname "$0")"
source "$here/call_setup.sh" "$@"
cfg="${TMPDIR:-/tmp}/plugins-correctness.toml"
bash "$here/gpu_config.sh" "$bin" "${TMPDIR:-/tmp}/thunder-correctness-kernel-cache" > "$cfg"
export THUNDER_CONFIG="$(cd "$(dirname "$cfg")" && pwd)/$(basename "$cfg")"
pydir="${TMPDIR:-/tmp}/thunder-correctness-py"
python3 -m pip install --no-deps --no-index --force-reinstall --quiet --target "$pydir" "$bin"/thunder_rs-*.whl \
  && export PYTHONPATH="$pydir:${PYTHONPATH:-}"
status=0
stage() { echo; echo "=== $1 ($(left) s left)"; }
stage "1. Triton packages against the interpreter (f32 reference)"
# Every package must claim its samples here, rms_norm's too (gpu_config.sh skips it otherwise).
TRITON_SKIP= bash "$here/gpu_config.sh" "$bin" "${TMPDIR:-/tmp}/thunder-correctness-kernel-cache" > "$cfg.all"
timeout 90 "$bin/thunder" --config "$cfg.all" triton-check --no-bench --json > "$out/triton_check.json" || status=$?
python3 -c "import json,sys; d=json.load(open(sys.argv[1]))['differential']; print(d['passed'], 'of', d['samples'], 'agree'); [print(' ', f) for f in d['failures']]" "$out/triton_check.json" || true
stage "2. learning curves, 200 steps bf16"
timeout $(( $(left) > 150 ? 150 : $(left) )) python3 "$here/gpt2_train_peer.py" --learn --steps 200 --dtype bf16 \
  --json "$out/gpt2_learn_curves.json" || status=$?
stage "3. gradient samples and OpInfo samples on cuda:0"
timeout $(( $(left) / 3 )) "$bin/thunder" --config "$cfg" opinfo-check --device cuda:0 --no-samples \
  --grads tests/fixtures/grads --json > "$out/opinfo_grads_cuda.json" || status=$?
timeout $(( $(left) - 5 )) "$bin/thunder" --config "$cfg" opinfo-check --device cuda:0 --no-grads \
  --json > "$out/opinfo_cuda.json" || status=$?
python3 - "$out" <<'PY'
import json, os, sys
out = sys.argv[1]
for name, key in (("opinfo_grads_cuda.json", "grads"), ("opinfo_cuda.json", None)):
    try:
        r = json.load(open(os.path.join(out, name)))
    except Exception as e:  # noqa: BLE001 (a stage cut off by its time limit writes nothing)
        print(f"{name}: no result ({e.__class__.__name__})")
        continue
    r = r[key] if key else r
    print(f"{name}: {r.get('cases', r.get('samples'))}, {r['counts']}, host fallbacks {r['host_fallbacks']}")
    for x in [x for x in r["rows"] if x["outcome"] in ("differ", "failed")][:30]:
        print("  %s %s: %s" % (x.get("case", x.get("sample")), x["outcome"], x["detail"][:160]))
PY
echo "correctness_check: $(( SECONDS - start )) s, status $status"
exit $status
