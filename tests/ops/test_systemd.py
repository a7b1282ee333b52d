"""The systemd unit runs: its own seccomp settings let a round finish and the sandbox start.

The unit's `SystemCallFilter`, `SystemCallErrorNumber`, `RestrictNamespaces` and
`RestrictAddressFamilies` are parsed from deploy/systemd/arena.service, the syscall sets expanded
by `systemd-analyze syscall-filter`, and applied through libseccomp by unit_seccomp.py (run by
Debian's /usr/bin/python3, which has python3-seccomp) to a child that execs the command. This is
what systemd does to the daemon, without needing systemd as PID 1.
"""

from __future__ import annotations

import functools
import json
import os
import pwd
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
UNIT = REPO / "deploy" / "systemd" / "arena.service"
LAUNCHER = Path(__file__).with_name("unit_seccomp.py")
SYSTEM_PYTHON = "/usr/bin/python3"
ARENA = Path(sys.executable).with_name("arena")


def _has_libseccomp_binding() -> bool:
    if not Path(SYSTEM_PYTHON).exists():
        return False
    return subprocess.run([SYSTEM_PYTHON, "-c", "import seccomp"], capture_output=True).returncode == 0


needs_analyze = pytest.mark.skipif(
    shutil.which("systemd-analyze") is None, reason="systemd-analyze missing (Debian's systemd package)"
)
needs_seccomp = pytest.mark.skipif(
    shutil.which("systemd-analyze") is None or not _has_libseccomp_binding(),
    reason="scripts/install-test-tools.sh installs python3-seccomp (and systemd-analyze comes with systemd)",
)


def service_settings(text: str) -> list[tuple[str, str]]:
    """The `[Service]` section's `Key=value` lines, in order (keys may repeat)."""
    settings, section = [], ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            section = line
        elif section == "[Service]":
            key, _, value = line.partition("=")
            settings.append((key.strip(), value.strip()))
    return settings


@functools.cache
def expand(name: str) -> frozenset[str]:
    """A syscall or `@set` as syscall names (sets expanded recursively by systemd itself)."""
    if not name.startswith("@"):
        return frozenset({name})
    out = subprocess.run(
        ["systemd-analyze", "syscall-filter", name], capture_output=True, text=True, check=True
    ).stdout
    names: set[str] = set()
    for line in out.splitlines()[1:]:  # the first line repeats the set's name
        item = line.strip()
        if item and not item.startswith("#"):
            names |= expand(item)
    return frozenset(names)


def seccomp_spec(text: str) -> dict:
    """The unit's seccomp settings as unit_seccomp.py's SPEC (systemd.exec(5) semantics)."""
    allow: set[str] | None = None
    err, namespaces, families = "kill", None, None
    for key, value in service_settings(text):
        if key == "SystemCallFilter":
            deny = value.startswith("~")
            names = set().union(*(expand(item) for item in value.removeprefix("~").split()))
            if deny:
                assert allow is not None, "a deny-list-only filter: the test expects an allow list"
                allow -= names
            else:
                # systemd adds @default to an allow list (the calls every process needs).
                allow = (allow or set(expand("@default"))) | names
        elif key == "SystemCallErrorNumber":
            err = value
        elif key == "RestrictNamespaces":
            namespaces = {"true": [], "false": None}.get(value, value.split())
        elif key == "RestrictAddressFamilies":
            families = value.split()
    assert allow is not None, "the unit has no SystemCallFilter allow list"
    return {"allow": sorted(allow), "errno": err, "namespaces": namespaces, "families": families}


def under_unit(spec: dict, tmp_path: Path, command: list[str], **popen) -> subprocess.Popen:
    """Start `command` under `spec`'s filters."""
    spec_file = tmp_path / f"spec-{len(list(tmp_path.glob('spec-*')))}.json"
    spec_file.write_text(json.dumps(spec))
    return subprocess.Popen([SYSTEM_PYTHON, str(LAUNCHER), str(spec_file), "--", *command], **popen)


def test_unit_filter_is_an_allow_list_that_errs_instead_of_killing() -> None:
    settings = dict(service_settings(UNIT.read_text()))
    # A deny list missed sched_setaffinity/mbind and killed the daemon with SIGSYS on `import torch`.
    assert settings["SystemCallErrorNumber"] == "EPERM"
    for key in ("NoNewPrivileges", "ProtectSystem", "User", "Restart"):
        assert key in settings
    # What arena/sandbox/boundary.py unshares for each worker, and no more.
    assert set(settings["RestrictNamespaces"].split()) == {
        "user",
        "mnt",
        "pid",
        "net",
        "ipc",
        "uts",
        "cgroup",
    }


@needs_analyze
def test_unit_filter_allows_what_torch_numpy_and_bubblewrap_call() -> None:
    allow = set(seccomp_spec(UNIT.read_text())["allow"])
    assert {"sched_setaffinity", "mbind"} <= allow  # MKL on `import torch`, OpenBLAS on `import numpy`
    assert {"unshare", "mount", "pivot_root", "umount2"} <= allow  # bubblewrap's namespaces and root
    assert not {"reboot", "kexec_load", "init_module", "swapon"} & allow


@needs_analyze
def test_systemd_analyze_verify_and_security(tmp_path: Path) -> None:
    # verify checks that ExecStart exists: point it at this venv's arena, as an install would.
    unit = tmp_path / "arena.service"
    unit.write_text(UNIT.read_text().replace("/opt/arena/bin/arena", str(ARENA)))
    verify = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True, text=True)
    assert verify.returncode == 0 and not verify.stderr.strip(), verify.stdout + verify.stderr
    security = subprocess.run(
        ["systemd-analyze", "security", "--offline=true", str(unit)], capture_output=True, text=True
    )
    if "--offline" in security.stderr:
        pytest.skip("this systemd-analyze has no --offline (systemd < 250)")
    level = re.search(r"Overall exposure level for arena.service: ([0-9.]+) (\w+)", security.stdout)
    assert level is not None, security.stdout + security.stderr
    assert float(level[1]) < 4.0 and level[2] == "OK", level[0]


@needs_seccomp
@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap missing (Debian's bubblewrap package)")
def test_a_bubblewrap_sandbox_starts_as_the_service_user_under_the_unit(tmp_path: Path) -> None:
    spec = {**seccomp_spec(UNIT.read_text()), "user": "nobody"}
    # The namespaces and options the sandbox's workers get (arena/sandbox/boundary.py), and a /proc
    # of the worker's own to look at them with.
    sandbox = [
        "bwrap", "--unshare-user", "--disable-userns", "--unshare-pid", "--unshare-net",
        "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try", "--die-with-parent", "--new-session",
        "--ro-bind", "/usr", "/usr", "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
        "--symlink", "usr/bin", "/bin", "--proc", "/proc", "--dev", "/dev", "--remount-ro", "/",
        "/bin/sh", "-c", "echo pid $$; grep -c . /proc/net/dev; grep Seccomp: /proc/self/status",
    ]  # fmt: skip
    nobody = pwd.getpwnam("nobody")
    plain = subprocess.run(
        sandbox, user=nobody.pw_uid, group=nobody.pw_gid, extra_groups=[], capture_output=True, text=True
    )
    if plain.returncode != 0:  # the kernel's limit, not the unit's: nothing to compare against
        pytest.skip(f"no unprivileged user namespaces on this machine: {plain.stderr.strip()}")
    started = under_unit(spec, tmp_path, sandbox, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out, _ = started.communicate(timeout=60)
    # A PID namespace of its own (bwrap's reaper is PID 1 there), a network namespace with only lo
    # (two header lines and lo), the filters inherited.
    assert started.returncode == 0 and out.split() == ["pid", "2", "3", "Seccomp:", "2"], out
    # The emulation binds: without the namespaces the unit grants, the same sandbox cannot start.
    started = under_unit({**spec, "namespaces": []}, tmp_path, sandbox, stderr=subprocess.PIPE, text=True)
    _, err = started.communicate(timeout=60)
    assert started.returncode != 0 and "namespace" in err


def light_round(data_dir: Path) -> dict[str, str]:
    """config/cpu-demo.toml, lighter: one arena environment and task, two turns, no diagnosis agent or yardstick."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ARENA_")}
    return env | {
        "ARENA_DATA_DIR": str(data_dir),  # the embedded model is converted here, inside the round
        "ARENA_ADMIN__ADDRESS": "127.0.0.1:0",
        "ARENA_LOGGING__FORMAT": "json",  # as the unit sets it
        "ARENA_DIAGNOSIS__AGENT": "false",
        "ARENA_ROUND__EVAL_MAX_ENVS": "1",
        "ARENA_ROUND__EVAL_TASKS_PER_ENV": "1",
        # The filter is what is tested, not the yardstick: no fixed tasks, no publish gate to run.
        "ARENA_ROUND__YARDSTICK_TASKS_PER_LEVEL": "0",
        "ARENA_TRAINER__PUBLISH_GATE": "false",
        "ARENA_ROUND__MAX_TURNS": "2",
        "ARENA_ROUND__MAX_TOKENS_PER_TURN": "48",
        "ARENA_CURRICULUM__TASKS_PER_ROUND": "1",
        "ARENA_TRAINER__TASKS_PER_STEP": "1",
        # A warm-up of two tasks: the demo's 140 would be most of an hour here.
        "ARENA_TRAINER__WARMUP_TASKS_PER_ENV": "1",
        "ARENA_TRAINER__WARMUP_MAX_TASKS": "2",
        "ARENA_TRAINER__TOOL_SUBSET": "1",
        "ARENA_DAEMON__MAX_PHASE_FAILURES": "1",
        # Every environment's tools run in the sandbox, so its workers start under the filter too.
        "ARENA_SANDBOX": "all",
    }


@needs_seccomp
@pytest.mark.model
@pytest.mark.slow
def test_a_round_finishes_under_the_units_filter_and_writes_only_log_lines(tmp_path: Path) -> None:
    spec = seccomp_spec(UNIT.read_text())
    command = [str(ARENA), "run", "--config", str(REPO / "config" / "cpu-demo.toml"), "--rounds", "1"]
    out, err = tmp_path / "stdout", tmp_path / "stderr"
    with out.open("w") as stdout, err.open("w") as stderr:
        daemon = under_unit(spec, tmp_path, command, stdout=stdout, stderr=stderr, env=light_round(tmp_path))
        filtered = ""
        deadline = time.monotonic() + 840
        while daemon.poll() is None and time.monotonic() < deadline:
            if not filtered:
                filtered = _status_once_execd(daemon.pid)
            time.sleep(1)
        if daemon.poll() is None:
            daemon.kill()
    lines = out.read_text().splitlines() + err.read_text().splitlines()
    assert daemon.returncode == 0, "\n".join(lines[-30:])  # SIGSYS would be -31 (rc 159 in a shell)
    assert "Seccomp:\t2" in filtered and "Seccomp_filters:\t3" in filtered
    records = []
    for line in lines:  # every line the daemon writes is a structured log line (no bars, no warnings)
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            pytest.fail(f"not a JSON log line: {line[:200]!r}")
    assert any(r.get("event") == "daemon.exit" and r.get("rounds_completed") == 1 for r in records)
    assert any(r.get("event") == "sandbox_pool_started" for r in records)  # its workers ran under it too


def _status_once_execd(pid: int) -> str:
    """/proc/PID/status once the launcher has exec'd the daemon (same pid), else ""."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_text()
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return ""
    args = cmdline.split("\0")
    # Before the exec the pid is still a fork of pytest, then the launcher; then `arena run`.
    return status if "--rounds" in args and not any("unit_seccomp" in a for a in args) else ""
