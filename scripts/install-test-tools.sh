#!/usr/bin/env bash
# System tools the suite uses: promtool (Debian's prometheus package) checks live /metrics and alert rules.
set -euo pipefail
if ! command -v promtool >/dev/null 2>&1; then
  if [ "$(id -u)" = "0" ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    apt-get install -y -qq --no-install-recommends prometheus >/dev/null
  else
    echo "promtool missing: install Debian's prometheus package (sudo apt-get install prometheus)" >&2
    exit 1
  fi
fi
