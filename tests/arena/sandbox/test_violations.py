"""Hostile code is contained with a clear `SandboxViolation`, and the pool keeps working after.

Two pools: one with every layer, one without the audit hook, which proves the OS layers (the
bubblewrap boundary, seccomp, rlimits) hold on their own. The fork bomb, the store, signals and
tampering are in test_hostile and test_isolation.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from arena.sandbox import SandboxLimits, SandboxPool, SandboxViolation

from .conftest import NOW, SHOP

pytestmark = pytest.mark.anyio

LIMITS = SandboxLimits(cpu_seconds=0.5, wall_timeout_s=3, memory_mb=256, max_processes=16)

INFINITE_LOOP = "def main(p):\n    while True:\n        pass\n"
SLEEPER = "import time\n\ndef main(p):\n    time.sleep(60)\n"
# Grows in 16 MB steps; gives up (and the test fails) at 4 GB if no limit stopped it.
MEMORY_BOMB = (
    "def main(p):\n"
    "    hoard = []\n"
    "    for _ in range(256):\n"
    "        hoard.append(bytearray(16 << 20))\n"
    "    return 'not stopped'\n"
)
CONNECT = (
    "import socket\n\n"
    "def main(p):\n"
    "    s = socket.create_connection(('127.0.0.1', p['port']), timeout=1)\n"
    "    return 'connected'\n"
)
READ_FILE = "def main(p):\n    with open(p['path']) as fh:\n        return fh.read()\n"
SYSTEM = "import os\n\ndef main(p):\n    return os.system('echo pwned > /tmp/pwned')\n"
SUBPROCESS = "import subprocess\n\ndef main(p):\n    return subprocess.run(['/bin/true']).returncode\n"
HEALTHY = "def main(p):\n    return p['n'] + 1\n"


@pytest.fixture(scope="module")
async def pool() -> AsyncIterator[SandboxPool]:
    async with SandboxPool(LIMITS, workers=2) as p:
        yield p


async def assert_violation(pool: SandboxPool, source: str, payload: dict, kind: str) -> SandboxViolation:
    kills = pool.kills
    with pytest.raises(SandboxViolation) as info:
        await pool.run_program(source, "main", payload)
    assert info.value.kind == kind, info.value
    assert pool.kills == kills + 1 and pool.kills_by_kind[kind] >= 1
    # The pool still works (a replacement worker comes up in the background).
    assert await pool.run_program(HEALTHY, "main", {"n": 41}) == 42
    return info.value


async def test_infinite_loop_hits_cpu_limit(pool: SandboxPool) -> None:
    violation = await assert_violation(pool, INFINITE_LOOP, {}, "cpu")
    assert "CPU time limit" in str(violation) and "0.5 s" in str(violation)


async def test_sleeping_job_hits_wall_timeout(pool: SandboxPool) -> None:
    start = time.monotonic()
    violation = await assert_violation(pool, SLEEPER, {}, "timeout")
    assert "wall-clock limit of 3 s" in str(violation)
    assert time.monotonic() - start < 30


async def test_memory_bomb_hits_address_space_limit() -> None:
    # A pool of its own with room on CPU: zero-filling 256 MB can take over the shared pool's 0.5 s
    # of CPU on a loaded machine (page reclaim is charged to the faulting process), and this test
    # is about memory.
    limits = LIMITS.model_copy(update={"cpu_seconds": 10.0, "wall_timeout_s": 30.0})
    async with SandboxPool(limits, workers=1) as roomy:
        violation = await assert_violation(roomy, MEMORY_BOMB, {}, "memory")
    assert "256 MB" in str(violation)


async def test_leaving_processes_behind_is_a_violation(pool: SandboxPool) -> None:
    source = "import os, time\n\ndef main(p):\n    if os.fork() == 0:\n        time.sleep(3)\n        os._exit(0)\n    return 'bye'\n"
    violation = await assert_violation(pool, source, {}, "processes")
    assert "left processes running" in str(violation)


async def test_network_connect_fails(pool: SandboxPool) -> None:
    violation = await assert_violation(pool, CONNECT, {"port": 8787}, "forbidden")
    assert "socket" in str(violation)


async def test_reading_outside_files_is_forbidden(pool: SandboxPool, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("top secret")
    for path in ("/etc/hostname", str(secret), "../../etc/passwd"):
        violation = await assert_violation(pool, READ_FILE, {"path": path}, "forbidden")
        assert "is not allowed" in str(violation)


async def test_os_system_and_subprocess_are_forbidden(pool: SandboxPool) -> None:
    await assert_violation(pool, SYSTEM, {}, "forbidden")
    violation = await assert_violation(pool, SUBPROCESS, {}, "forbidden")
    assert "subprocess" in str(violation)
    assert not await anyio.Path("/tmp/pwned").exists()


async def test_violation_in_a_tool_call(pool: SandboxPool, tmp_path: Path, shop_image: bytes) -> None:
    env = tmp_path / "evil_shop"
    env.mkdir()
    (env / "tools.py").write_text((SHOP / "tools.py").read_text() + "\n\nimport os\nos.system('id')\n")
    with pytest.raises(SandboxViolation) as info:
        await pool.call_tool(
            env,
            shop_image,
            now=NOW,
            user_id=1,
            id_counters={},
            tool="get_item",
            arguments={"item_id": "IT-1"},
        )
    assert info.value.kind == "forbidden" and "tool call get_item" in str(info.value)


# ---------------------------------------------------------------- the OS layers alone

OS_PROBE = (
    "import os, socket, sys\n\n"
    "def attempt(fn):\n"
    "    try:\n"
    "        return repr(fn())\n"
    "    except Exception as exc:\n"
    "        return type(exc).__name__ + ': ' + str(exc)\n\n"
    "def main(p):\n"
    "    return {\n"
    "        'read': attempt(lambda: open(p['path']).read()),\n"
    "        'hostname': attempt(lambda: open('/etc/hostname').read()),\n"
    "        'connect': attempt(lambda: socket.create_connection(('127.0.0.1', 8787), timeout=1)),\n"
    "        'system': attempt(lambda: os.system('true')),\n"
    "        'exec': attempt(lambda: os.execv('/bin/true', ['true'])),\n"
    "        'uid': os.getuid(),\n"
    "        'loaded': [m for m in ('subprocess', '_posixsubprocess', 'ctypes', '_ctypes') if m in sys.modules],\n"
    "    }\n"
)


async def test_os_layers_hold_without_the_audit_hook(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("top secret")
    async with SandboxPool(LIMITS, workers=1, audit_hook=False) as pool:
        seen = await pool.run_program(OS_PROBE, "main", {"path": str(secret)})
        await assert_violation(pool, INFINITE_LOOP, {}, "cpu")
    assert "Operation not permitted" in seen["connect"]  # seccomp: no sockets at all
    assert seen["system"] != "0"  # the shell cannot be executed
    assert seen["loaded"] == []  # nothing that spawns or pokes memory was left importable for free
    assert "Operation not permitted" in seen["exec"] or "No such file" in seen["exec"]
    # The host's files do not exist in the sandbox's mount namespace, whoever runs the daemon.
    assert seen["read"].startswith("FileNotFoundError")
    assert seen["hostname"].startswith("FileNotFoundError")
    assert seen["uid"] != 0
