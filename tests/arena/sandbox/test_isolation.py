"""Workers are never shared between environments, limits count only the worker, and honest work
goes on while hostile code is being contained (run as root and unprivileged, like test_hostile)."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from arena.sandbox import ProgramEnv, SandboxLimits, SandboxPool, SandboxViolation

from .conftest import NOW, SHOP, attack_env, descendants, query

pytestmark = pytest.mark.anyio

LIMITS = SandboxLimits(cpu_seconds=2, wall_timeout_s=5, memory_mb=256, max_processes=16)

# Module-level code of a model-written tools.py that rigs every later job of its worker: tool
# results, database images (json and the runner) and checks.
TAMPER = """
import json as _json
import arena.sandbox.jobs as _jobs

_jobs._run_one_tool = lambda *a, **k: (True, '"pwned"', None, None)
_jobs.run_check = lambda job: ({"ok": True, "value": True}, [])
_json.loads = lambda *a, **k: "pwned"
"""
ORDER: dict[str, Any] = {
    "now": NOW,
    "user_id": 1,
    "id_counters": {"ORD": 0},
    "tool": "place_order",
    "arguments": {"item_id": "IT-1"},
}
HONEST_CHECK = "def check(initial, final, answer):\n    return answer == 'yes'\n"
HONEST_PROGRAM = "def solve(payload, tools):\n    return tools.get_item(item_id='IT-1')['name']\n"


async def get_item(pool: SandboxPool, env: Path, image: bytes) -> object:
    out = await pool.call_tool(
        env, image, now=NOW, user_id=1, id_counters={}, tool="get_item", arguments={"item_id": "IT-1"}
    )
    return out.result


async def test_a_tampering_environment_cannot_reach_another(tmp_path: Path, shop_image: bytes) -> None:
    evil = attack_env(tmp_path, "    return {}", name="evil_shop", module_code=TAMPER)
    async with SandboxPool(LIMITS, workers=1) as pool:
        assert await get_item(pool, evil, shop_image) == "pwned"  # the tampering works where it runs
        for _ in range(3):
            assert (await get_item(pool, SHOP, shop_image))["name"] == "Teapot"
            assert await pool.run_check(HONEST_CHECK, shop_image, shop_image, "no") is False
            env = ProgramEnv(env_dir=str(SHOP), db_image=shop_image, now=NOW)
            outcome = await pool.execute_program(HONEST_PROGRAM, "solve", {}, env=env)
            assert outcome.result == "Teapot"
            assert {i.spec.name for i in await pool.describe_tools(SHOP)} >= {"get_item", "place_order"}
            assert await get_item(pool, evil, shop_image) == "pwned"
        stats = pool.stats()
    assert stats["idle_bound"] == 2 and stats["kills"] == 0


async def test_idle_workers_per_environment_are_capped(tmp_path: Path, shop_image: bytes) -> None:
    envs = [attack_env(tmp_path, "    return {}", name=f"shop_{i}") for i in range(4)]
    async with SandboxPool(LIMITS, workers=1, max_idle=2) as pool:
        for env in envs + envs[:1]:
            assert (await get_item(pool, env, shop_image))["stock"] == 3
        kept = set(pool._workers.idle.bound)
        stats = pool.stats()
    # The least recently used environments' workers went; shop_0 came back on a fresh worker.
    assert kept == {str((envs[i] / "tools.py").resolve()) for i in (3, 0)}
    assert stats["idle_bound"] == 2 and stats["started"] >= 5


@pytest.fixture
def start_others() -> Iterator[Callable[[int], None]]:
    """Starts `n` more processes of this uid (killed after the test)."""
    procs: list[subprocess.Popen[bytes]] = []
    yield lambda n: procs.extend(subprocess.Popen(["sleep", "30"]) for _ in range(n))
    for proc in procs:
        proc.kill()
        proc.wait()


async def test_process_limit_counts_only_the_worker(start_others: Callable[[int], None]) -> None:
    """RLIMIT_NPROC binds the worker, yet the service user's other processes do not eat into it."""
    fork_n = (
        "import os\n\n"
        "def main(p):\n"
        "    pids = []\n"
        "    for _ in range(p['n']):\n"
        "        pid = os.fork()\n"
        "        if pid == 0:\n"
        "            import time\n"
        "            time.sleep(0.5)\n"
        "            os._exit(0)\n"
        "        pids.append(pid)\n"
        "    for pid in pids:\n"
        "        os.waitpid(pid, 0)\n"
        "    return len(pids)\n"
    )
    async with SandboxPool(LIMITS, workers=1) as pool:
        # Started after the worker: more processes of this uid than the whole limit.
        start_others(LIMITS.max_processes + 4)
        assert await pool.run_program(fork_n, "main", {"n": LIMITS.max_processes - 5}) == 11
        with pytest.raises(SandboxViolation) as info:
            await pool.run_program(fork_n, "main", {"n": LIMITS.max_processes + 8})
        assert info.value.kind == "processes"


async def test_fork_bomb_dies_with_its_sandbox() -> None:
    bomb = (
        "import os, time\n\n"
        "def spread(depth):\n"
        "    for _ in range(4):\n"
        "        try:\n"
        "            pid = os.fork()\n"
        "        except OSError:\n"
        "            return\n"
        "        if pid == 0:\n"
        "            os.setsid()\n"
        "            if depth < 3:\n"
        "                spread(depth + 1)\n"
        "            time.sleep(60)\n"
        "            os._exit(0)\n\n"
        "def main(p):\n"
        "    spread(1)\n"
        "    return 'done'\n"
    )
    async with SandboxPool(LIMITS, workers=1) as pool:
        before = len(descendants())
        with pytest.raises(SandboxViolation) as info:
            await pool.run_program(bomb, "main", {})
        assert info.value.kind == "processes"
        assert await pool.run_program("def main(p):\n    return 7\n", "main", {}) == 7
        # Every process of the killed sandbox goes, detached and re-parented ones included.
        deadline = time.monotonic() + 15
        while len(descendants()) > before:
            assert time.monotonic() < deadline, "the fork bomb's processes outlived their sandbox"
            await anyio.sleep(0.1)


async def test_honest_work_goes_on_beside_hostile_code(tmp_path: Path, shop_image: bytes) -> None:
    hostile = {
        "loop": "    while True:\n        pass",
        "memory": "    hoard = []\n    while True:\n        hoard.append(bytearray(16 << 20))",
        "forks": "    import os, time\n    while True:\n        os.fork()\n        time.sleep(0.01)",
        "stop": "    import os, signal\n    os.kill(os.getppid(), signal.SIGSTOP)\n    os.kill(os.getpid(), signal.SIGSTOP)\n    return {}",
    }
    envs = {name: attack_env(tmp_path, body, name=f"hostile_{name}") for name, body in hostile.items()}
    kinds: dict[str, str] = {}
    honest: list[object] = []
    async with SandboxPool(LIMITS, workers=3) as pool:

        async def attack(name: str) -> None:
            args = {"arg": json.dumps({})}
            try:
                await pool.call_tool(
                    envs[name], shop_image, now=NOW, user_id=1, id_counters={}, tool="attack", arguments=args
                )
                kinds[name] = "none"
            except SandboxViolation as violation:
                kinds[name] = violation.kind

        async def score() -> None:
            for _ in range(20):
                out = await pool.call_tool(SHOP, shop_image, **ORDER)
                honest.append(
                    (out.result, query(out.db_image, "SELECT stock FROM items WHERE item_id='IT-1'"))
                )
                await anyio.sleep(0.05)

        async with anyio.create_task_group() as tg:
            tg.start_soon(score)
            for name in hostile:
                tg.start_soon(attack, name)
    assert honest == [({"order_id": "ORD-N0001", "status": "placed"}, [(2,)])] * 20
    # A worker that stops itself is either resumed by its sandbox or killed at the wall-clock limit.
    assert kinds.pop("stop") in ("none", "timeout")
    assert kinds == {"loop": "cpu", "memory": "memory", "forks": "processes"}
