#!/usr/bin/env bash
# The sandbox's hostile-code tests as an unprivileged user, through the service's own code path.
#
# Why: the service runs as a non-root user (the systemd unit's User=arena, the Deployment's
# runAsNonRoot), and there the sandbox boundary is built differently (bubblewrap creates a user
# namespace; Linux applies RLIMIT_NPROC, which it never applies to root). Sessions and CI run as
# root, so without this step the service's path would never be exercised.
#
# As root: install bubblewrap if missing, create the system user arena-test (idempotent), build a
# venv that user can read from Debian's /usr/bin/python3.11 (the pyenv interpreter under /root is
# not readable by other users) with only the packages tests/arena/sandbox imports, pinned to the
# versions of the main venv, and run tests/arena/sandbox as arena-test. The venv and a copy of the
# checkout's code and tests live in a folder every user can read (ARENA_TEST_DIR), so the step
# works wherever the checkout is, root's home included. Run as any other user, the whole suite
# already is unprivileged: this step has nothing to add and says so.
set -euo pipefail
cd "$(dirname "$0")/.."

TEST_USER=${ARENA_TEST_USER:-arena-test}
WORK=${ARENA_TEST_DIR:-/var/tmp/arena-sandbox-nonroot}
VENV=$WORK/venv
SRC=$WORK/src
SYSTEM_PYTHON=${ARENA_TEST_PYTHON:-/usr/bin/python3.11}
MAIN_PYTHON=${ARENA_MAIN_PYTHON:-.venv/bin/python}
# What `arena.sandbox`, `arena.env` and the sandbox tests import, and pytest itself.
PACKAGES=(pydantic pydantic-core annotated-types typing-extensions typing-inspection anyio idna
  sniffio structlog jsonschema jsonschema-specifications referencing rpds-py attrs
  pytest pluggy iniconfig packaging pygments pytest-timeout)

if [ "$(id -u)" != "0" ]; then
  echo "test-sandbox-nonroot: running as uid $(id -u) already: the main suite covers the unprivileged path"
  exit 0
fi

if ! command -v bwrap >/dev/null 2>&1; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq --no-install-recommends bubblewrap >/dev/null
fi
if ! id -u "$TEST_USER" >/dev/null 2>&1; then
  useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin "$TEST_USER"
fi
mkdir -p "$WORK"
chmod 755 "$WORK"
# A fresh copy of what the workers and the tests import: the same code, readable by the test user.
rm -rf "$SRC"
mkdir -p "$SRC"
cp -a arena tests pyproject.toml "$SRC"/
find "$SRC" -name __pycache__ -prune -exec rm -rf {} +
chmod -R a+rX "$SRC"

# Pinned to the main venv's versions, so both runs test the same libraries.
pins=$("$MAIN_PYTHON" - "${PACKAGES[@]}" <<'PY'
import importlib.metadata as metadata
import sys

print("\n".join(f"{name}=={metadata.version(name)}" for name in sys.argv[1:]))
PY
)
stamp="$VENV/.installed-$(printf '%s' "$pins" | sha256sum | cut -c1-16)"
if [ ! -f "$stamp" ]; then
  rm -rf "$VENV"
  "$SYSTEM_PYTHON" -m venv "$VENV"
  # --no-deps: the pins are the whole closure; no resolver run, no surprise upgrade.
  # shellcheck disable=SC2086
  if ! "$VENV/bin/python" -m pip install -q --disable-pip-version-check --no-deps $pins >"$VENV/pip.log" 2>&1; then
    cat "$VENV/pip.log" >&2
    exit 1
  fi
  touch "$stamp"
fi
chmod -R a+rX "$VENV"

# A clean environment: HOME and TMPDIR the test user can write, the copy on PYTHONPATH (arena is
# imported from it, as the workers do), no bytecode written into it.
cd "$SRC"
exec runuser -u "$TEST_USER" -- env -i \
  PATH=/usr/bin:/bin HOME=/tmp LANG=C.UTF-8 TMPDIR=/tmp PYTHONDONTWRITEBYTECODE=1 \
  PYTHONPATH="$SRC" \
  "$VENV/bin/python" -m pytest tests/arena/sandbox -p no:cacheprovider -q "$@"
