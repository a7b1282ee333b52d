#!/usr/bin/env bash
# A side interpreter for `arena bench tau2 --parity` and `arena bench env --tau2`: a venv with
# tau2-bench's dependencies (read from the checkout's pyproject.toml), kept out of Arena's venv.
# tau2-bench asks for Python >= 3.12 in its metadata but runs on 3.11 with its src/ on PYTHONPATH,
# which is how Arena runs it: the package itself is not installed.
#   usage: scripts/tau2-side-venv.sh CHECKOUT [VENV]   (VENV defaults to var/tau2-venv)
set -euo pipefail
checkout=${1:?usage: scripts/tau2-side-venv.sh CHECKOUT [VENV]}
venv=${2:-var/tau2-venv}
python=${PYTHON:-python3.11}
test -f "$checkout/pyproject.toml" || { echo "$checkout: no pyproject.toml (not a tau2-bench checkout)" >&2; exit 2; }
test -x "$venv/bin/python" || "$python" -m venv "$venv"
mapfile -t deps < <("$python" -c 'import sys, tomllib; print("\n".join(tomllib.load(open(sys.argv[1], "rb"))["project"]["dependencies"]))' "$checkout/pyproject.toml")
"$venv/bin/pip" install -q --disable-pip-version-check "${deps[@]}"
echo "side interpreter: $venv/bin/python  (export ARENA_TAU2_PYTHON=$venv/bin/python)"
