#!/usr/bin/env bash
# Python CI for thunder_rs: a virtualenv OUTSIDE the repository (made once, then reused) with
# PyTorch, maturin and pytest from PyPI; builds the wheel (scripts/python_wheel.sh), installs
# it, and runs python/tests with pytest.
#
#   scripts/python_ci.sh                        # venv: ${THUNDER_PY_VENV:-$HOME/.cache/thunder-rs/venv}
#   THUNDER_PY_VENV=/path/to/venv scripts/python_ci.sh
#
# PYTHON picks the interpreter that makes the venv (default python3, >= 3.9). Exits non-zero
# with a message naming the step that failed.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
venv="${THUNDER_PY_VENV:-$HOME/.cache/thunder-rs/venv}"
python="${PYTHON:-python3}"

step() { echo "== python_ci: $*"; }
fail() { echo "python_ci: FAILED: $*" >&2; exit 1; }

case "$venv" in
  "$root"|"$root"/*) fail "the virtualenv ($venv) must be outside the repository ($root)" ;;
esac

if [ ! -x "$venv/bin/python" ]; then
  command -v "$python" >/dev/null 2>&1 || fail "no $python to make the virtualenv (set PYTHON)"
  "$python" -c 'import sys; sys.exit(sys.version_info < (3, 9))' || fail "$python is older than 3.9"
  step "making the virtualenv $venv"
  mkdir -p "$(dirname "$venv")"
  "$python" -m venv "$venv" || fail "python -m venv $venv (install the python3-venv package?)"
fi

if ! "$venv/bin/python" -c 'import torch, maturin, pytest' >/dev/null 2>&1; then
  step "installing torch, maturin, pytest into $venv (torch is large; this happens once)"
  "$venv/bin/python" -m pip install --upgrade pip >/dev/null || fail "pip upgrade"
  "$venv/bin/python" -m pip install torch maturin pytest numpy || fail "pip install torch maturin pytest numpy"
fi
maturin="$venv/bin/maturin"
[ -x "$maturin" ] || fail "maturin is not in $venv/bin"

step "building the wheel"
wheels="$root/target/wheels"
MATURIN="$maturin" "$root/scripts/python_wheel.sh" "$wheels" || fail "building the wheel"

step "installing the wheel"
wheel="$(ls "$wheels"/thunder_rs-*.whl | head -n 1)"
"$venv/bin/python" -m pip install --force-reinstall --no-deps "$wheel" >/dev/null || fail "pip install $wheel"

step "pytest"
# Run from outside the source tree so that the installed package (with its plugins) is tested.
cd "$root/python/tests"
env -u THUNDER_CONFIG -u THUNDER_PLUGIN_DIR -u THUNDER_EXECUTORS \
  "$venv/bin/python" -m pytest -q -p no:cacheprovider . || fail "pytest"
step "ok"
