"""Fixtures for the ops tests: fake phases, configurations on a temp data dir, a running daemon."""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

import anyio
import httpx
import pytest

from ops.config import ArenaConfig, load_config

FAKE_DAEMON = Path(__file__).with_name("fake_daemon.py")


def _load_fakes() -> ModuleType:
    name = "arena_test_fake_daemon"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, FAKE_DAEMON)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def fakes() -> ModuleType:
    """The fake phases module."""
    return _load_fakes()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def make_config(tmp_path: Path) -> Callable[..., ArenaConfig]:
    """A config on a temp data dir with an ephemeral admin port; extra ARENA_* values as keywords."""

    def make(**env: str) -> ArenaConfig:
        base = {
            "ARENA_DATA_DIR": str(tmp_path / "var"),
            "ARENA_ADMIN__ADDRESS": "127.0.0.1:0",
            "ARENA_DAEMON__RETRY_BACKOFF_S": "0.05",
            "ARENA_DAEMON__READINESS_INTERVAL_S": "0.2",
        }
        return load_config(environ={**base, **env})

    return make


@pytest.fixture
def plan_output() -> Callable[..., Any]:
    """`plan_output(tasks={env: n}, **fields)`: a `PlanOutput` with that allocation and nothing
    else planned (no guidelines, spread, simulated points, complexification or new environments)
    but the `fields` given, for running SYNTHESIZE on its own."""
    from curriculum.sampling import Allocation
    from ops.phases.outputs import PlanOutput

    def make(tasks: dict[str, int] | None = None, **fields: Any) -> PlanOutput:
        tasks = tasks or {}
        allocation = Allocation(
            tasks=tasks,
            weights={e: 1.0 for e in tasks},
            executable_budget=sum(tasks.values()),
            simulated_budget=0,
        )
        empty: dict[str, Any] = {
            "guidelines": [],
            "spread": {},
            "simulated": {},
            "complexify": [],
            "new_envs": [],
        }
        return PlanOutput(allocation=allocation, **{**empty, **fields})

    return make


@asynccontextmanager
async def running(daemon: Any) -> AsyncIterator[httpx.AsyncClient]:
    """Run `daemon` in a task group; yield an HTTP client on its admin API; wait for it to exit."""
    async with anyio.create_task_group() as tg:
        tg.start_soon(daemon.run)
        with anyio.fail_after(20):
            while daemon.admin is None or daemon.admin.sock is None:  # noqa: ASYNC110 - polling a plain attribute
                await anyio.sleep(0.01)
        base = f"http://127.0.0.1:{daemon.admin.port}"
        async with httpx.AsyncClient(base_url=base, timeout=10) as client:
            yield client


async def wait_for(predicate: Callable[[], bool], limit: float = 20) -> None:
    """Poll until `predicate()` holds."""
    with anyio.fail_after(limit):
        while not predicate():  # noqa: ASYNC110 - polling state that has no event
            await anyio.sleep(0.01)


@pytest.fixture
def run_daemon() -> Callable[[Any], Any]:
    """`async with run_daemon(daemon) as client:` runs it and gives an admin API client."""
    return running


@pytest.fixture
def until() -> Callable[..., Any]:
    """`await until(predicate, timeout)` polls until the predicate holds."""
    return wait_for


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _spawn(data_root: Path, **env: str) -> tuple[subprocess.Popen[str], str]:
    port = _free_port()
    full = {
        **os.environ,
        "ARENA_DATA_DIR": str(data_root / "var"),
        "ARENA_ADMIN__ADDRESS": f"127.0.0.1:{port}",
        **env,
    }
    proc = subprocess.Popen(
        [sys.executable, str(FAKE_DAEMON)],
        env=full,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    return proc, f"http://127.0.0.1:{port}"


@pytest.fixture
def spawn_daemon() -> Callable[..., tuple[subprocess.Popen[str], str]]:
    """`spawn_daemon(root, **env)` starts fake_daemon.py as a subprocess; returns it and its admin URL."""
    return _spawn


@pytest.fixture
def small_eval() -> Callable[..., dict[str, str]]:
    """`small_eval(model, **overrides)`: settings for a real EVALUATE on the embedded model that
    runs a few short episodes of one executable environment, one at a time."""

    def settings(model: Path, **overrides: str) -> dict[str, str]:
        base = {
            "ARENA_MODELS__POLICY__MODEL": str(model),
            "ARENA_MODELS__HELPER__MODEL": str(model),
            "ARENA_ROUND__EVAL_MAX_ENVS": "1",
            "ARENA_ROUND__EVAL_SIMULATED": "false",
            "ARENA_ROUND__EVAL_TASKS_PER_ENV": "3",
            "ARENA_ROUND__EPISODE_CONCURRENCY": "1",
            "ARENA_ROUND__MAX_TURNS": "1",
            "ARENA_ROUND__MAX_TOKENS_PER_TURN": "16",
            # These tests are about the phases, not the yardstick's caps (tests/ops/test_yardstick.py).
            "ARENA_ROUND__YARDSTICK_CAPS": "round",
            "ARENA_TRAINER__SYSTEM_PROMPT": "compact",
            "ARENA_TRAINER__TOOL_SUBSET": "0",
            # The 135M helper cannot write an environment; tests/ops/test_new_envs.py covers it.
            "ARENA_SYNTHESIS__NEW_ENVS_PER_ROUND": "0",
        }
        return base | overrides

    return settings
