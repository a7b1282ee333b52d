"""Hostile tool code is contained by the boundary, with and without the audit hook.

Run as root (the main suite) and as an unprivileged user (`scripts/test-sandbox-nonroot.sh`, as the
service runs): every case must hold both ways. The code runs as a tool, that is in the long-lived
worker itself, the way synthesized environments' tools run. "Contained" is checked on the host's
side (the file, the listener, the daemon's state), not only from the error the sandbox returns.
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from arena.sandbox import SandboxLimits, SandboxPool, SandboxToolOutcome, SandboxViolation

from .conftest import NOW, attack_env, build_image

pytestmark = pytest.mark.anyio

LIMITS = SandboxLimits(cpu_seconds=2, wall_timeout_s=5, memory_mb=256, max_processes=16)
IS_ROOT = os.geteuid() == 0


@pytest.fixture(scope="module", params=["all layers", "OS layers only"])
async def pool(request: pytest.FixtureRequest) -> AsyncIterator[SandboxPool]:
    async with SandboxPool(LIMITS, workers=2, audit_hook=request.param == "all layers") as p:
        yield p


async def attack(
    pool: SandboxPool, root: Path, body: str, payload: dict[str, Any]
) -> SandboxToolOutcome | SandboxViolation:
    """Run `body` as the tool `attack` of a fresh environment; the outcome or the violation."""
    env = attack_env(root, body, name=f"attack_{uuid.uuid4().hex[:8]}")
    image = build_image()
    try:
        return await pool.call_tool(
            env,
            image,
            now=NOW,
            user_id=1,
            id_counters={},
            tool="attack",
            arguments={"arg": json.dumps(payload)},
        )
    except SandboxViolation as violation:
        return violation


def text_of(result: SandboxToolOutcome | SandboxViolation) -> str:
    if isinstance(result, SandboxViolation):
        return str(result)
    return json.dumps(result.result) + str(result.error)


async def test_boundary_layers(pool: SandboxPool) -> None:
    layers = pool.layers
    assert layers["namespaces"].startswith("bubblewrap")
    assert layers["seccomp"].startswith("no exec")
    assert "RLIMIT_NPROC=16" in layers["rlimits"]
    if IS_ROOT:
        assert layers["uid"].startswith("private uid")
    else:
        assert layers["user_namespace"] == "yes" and "user namespace" in layers["uid"]


@pytest.fixture
def host_dir(tmp_path: Path) -> Path:
    """A folder the unprivileged run's worker uid could read and write, if it could reach it."""
    secret = tmp_path / "secret.txt"
    secret.write_text("top secret 4711")
    secret.chmod(0o644)
    store = tmp_path / "arena.db"
    with sqlite3.connect(store) as conn:
        conn.execute("CREATE TABLE secrets (value TEXT)")
        conn.execute("INSERT INTO secrets VALUES ('store secret 4242')")
    store.chmod(0o666)
    tmp_path.chmod(0o777)
    return tmp_path


@pytest.fixture
def decoy() -> Iterator[subprocess.Popen[bytes]]:
    """A process of this uid outside every sandbox."""
    proc = subprocess.Popen(["sleep", "60"])
    yield proc
    proc.kill()
    proc.wait()


async def test_reading_outside_files(pool: SandboxPool, host_dir: Path) -> None:
    tmp_path, secret = host_dir, host_dir / "secret.txt"
    for path in (str(secret), "/etc/passwd", "/proc/1/environ"):
        result = await attack(pool, tmp_path, "    return {'data': open(p['path']).read()}", {"path": path})
        assert "4711" not in text_of(result) and "root:" not in text_of(result)
        assert isinstance(result, SandboxViolation) or not result.ok
    listing = await attack(pool, tmp_path, "    import os\n    return {'root': sorted(os.listdir('/'))}", {})
    if not isinstance(listing, SandboxViolation) and listing.ok:  # the audit hook refuses listing
        bound = {path.split("/")[1] for path in pool.layers["readable"]}
        assert set(listing.result["root"]) <= bound | {"arena-sandbox", "dev", "lib", "lib64"}
        assert "proc" not in listing.result["root"]
        # /tmp shows only when a readable bind lives there (a checkout under /tmp, as in some CI
        # clones), and then holds nothing but that bind's path: never the host's /tmp.
        in_tmp = {path.split("/")[2] for path in pool.layers["readable"] if path.startswith("/tmp/")}
        if "tmp" in listing.result["root"]:
            assert in_tmp
            inner = await attack(
                pool, tmp_path, "    import os\n    return {'tmp': sorted(os.listdir('/tmp'))}", {}
            )
            assert not isinstance(inner, SandboxViolation) and set(inner.result["tmp"]) <= in_tmp


async def test_writing_outside(pool: SandboxPool, host_dir: Path) -> None:
    tmp_path = host_dir
    targets = [tmp_path / "pwned", Path(f"/tmp/arena-pwned-{uuid.uuid4().hex}")]
    body = "    for t in p['targets']:\n        open(t, 'w').write('pwned')\n    return {}"
    await attack(pool, tmp_path, body, {"targets": [str(t) for t in targets]})
    assert not [t for t in targets if await anyio.Path(t).exists()]


async def test_store_through_sqlite_attach(pool: SandboxPool, host_dir: Path) -> None:
    tmp_path, store = host_dir, host_dir / "arena.db"
    body = (
        "    import sqlite3\n"
        "    c = sqlite3.connect(':memory:')\n"
        "    c.execute('ATTACH DATABASE ? AS s', (p['path'],))\n"
        "    rows = c.execute('SELECT value FROM s.secrets').fetchall()\n"
        "    c.execute(\"INSERT INTO s.secrets VALUES ('tampered')\")\n"
        "    c.commit()\n"
        "    return {'rows': rows}"
    )
    result = await attack(pool, tmp_path, body, {"path": str(store)})
    assert "4242" not in text_of(result)
    with sqlite3.connect(store) as conn:
        assert conn.execute("SELECT value FROM secrets").fetchall() == [("store secret 4242",)]


async def test_network(pool: SandboxPool, tmp_path: Path) -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        listener.setblocking(False)
        body = (
            "    import socket\n"
            "    s = socket.create_connection(('127.0.0.1', p['port']), timeout=2)\n"
            "    s.sendall(b'hello')\n"
            "    return {'connected': True}"
        )
        result = await attack(pool, tmp_path, body, {"port": listener.getsockname()[1]})
        with pytest.raises(BlockingIOError):
            listener.accept()
    assert "connected" not in text_of(result)


async def test_os_system(pool: SandboxPool, tmp_path: Path) -> None:
    marker = Path(f"/tmp/arena-system-{uuid.uuid4().hex}")
    body = "    import os\n    return {'rc': os.system('touch ' + p['marker'])}"
    result = await attack(pool, tmp_path, body, {"marker": str(marker)})
    assert not await anyio.Path(marker).exists()
    assert isinstance(result, SandboxViolation) or not result.ok or result.result["rc"] != 0


@contextmanager
def stop_watch(pids: list[int]) -> Iterator[list[str]]:
    """Watch `pids` from a separate process; a stopped one is resumed (so a failure cannot hang
    the suite) and reported in the yielded list, filled when the block ends."""
    script = (
        "import os, signal, sys, time\n"
        "pids = [int(a) for a in sys.argv[1:]]\n"
        "stopped = set()\n"
        "while True:\n"
        "    for pid in pids:\n"
        "        try:\n"
        "            state = open(f'/proc/{pid}/stat').read().rsplit(')', 1)[1].split()[0]\n"
        "        except OSError:\n"
        "            continue\n"
        "        if state in 'Tt' and pid not in stopped:\n"
        "            stopped.add(pid)\n"
        "            print(pid, flush=True)\n"
        "            os.kill(pid, signal.SIGCONT)\n"
        "    time.sleep(0.02)\n"
    )
    watcher = subprocess.Popen(
        [sys.executable, "-c", script, *map(str, pids)], stdout=subprocess.PIPE, text=True
    )
    report: list[str] = []
    try:
        time.sleep(0.2)
        yield report
        time.sleep(0.3)
    finally:
        watcher.terminate()
        out, _ = watcher.communicate(timeout=10)
        report.extend(out.split())


async def test_signalling_the_parent_and_the_daemon(
    pool: SandboxPool, tmp_path: Path, decoy: subprocess.Popen[bytes]
) -> None:
    body = (
        "    import os, signal\n"
        "    tried = {}\n"
        "    for name, pid in (('parent', os.getppid()), ('daemon', p['daemon']), ('decoy', p['decoy'])):\n"
        "        for sig in (signal.SIGSTOP, signal.SIGTERM):\n"
        "            try:\n"
        "                os.kill(pid, sig)\n"
        "                tried[name] = 'sent'\n"
        "            except OSError as exc:\n"
        "                tried[name] = type(exc).__name__\n"
        "    return tried"
    )
    with stop_watch([os.getpid(), decoy.pid]) as stopped:
        result = await attack(pool, tmp_path, body, {"daemon": os.getpid(), "decoy": decoy.pid})
    assert stopped == [], f"sandboxed code stopped {stopped} (this process is {os.getpid()})"
    assert decoy.poll() is None, "sandboxed code killed a process outside its sandbox"
    if not isinstance(result, SandboxViolation) and result.ok:
        # The daemon's and the decoy's pids name nothing inside the sandbox's PID namespace.
        assert result.result["daemon"] == "ProcessLookupError"
        assert result.result["decoy"] == "ProcessLookupError"
    assert await pool.run_program("def main(p):\n    return 1\n", "main", {}) == 1
