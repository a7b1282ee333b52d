#!/usr/bin/env bash
# System tools the suite uses, from Debian's packages:
#   promtool (prometheus)        checks live /metrics and the alert rules;
#   python3-seccomp              libseccomp for /usr/bin/python3: tests/ops/test_systemd.py applies
#                                the systemd unit's own syscall filter to a round through it;
#   bubblewrap                   the sandbox's namespaces (started under the unit's filter too);
#   systemd (systemd-analyze)    expands the unit's syscall sets, verify and security.
set -euo pipefail
missing=()
command -v promtool >/dev/null 2>&1 || missing+=(prometheus)
/usr/bin/python3 -c "import seccomp" >/dev/null 2>&1 || missing+=(python3-seccomp)
command -v bwrap >/dev/null 2>&1 || missing+=(bubblewrap)
command -v systemd-analyze >/dev/null 2>&1 || missing+=(systemd)
if [ "${#missing[@]}" -gt 0 ]; then
  if [ "$(id -u)" = "0" ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  else
    echo "missing test tools: sudo apt-get install ${missing[*]}" >&2
    exit 1
  fi
fi
