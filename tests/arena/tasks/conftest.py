"""Fixtures for the task tests: the small `bank` environment, its tasks, and `play` (scripted calls)."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from arena.env.loader import load_environment
from arena.env.runtime import Environment
from arena.tasks.model import Task
from arena.tasks.toml_io import load_tasks
from arena.tasks.transcript import ReplayTranscript
from arena.types import Message, ToolCall

BANK_DIR = Path(__file__).parent / "fixtures" / "bank"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def bank_env() -> Environment:
    """The test bank environment (real loader, real SQLite)."""
    return load_environment(BANK_DIR)


@pytest.fixture(scope="session")
def bank_tasks(bank_env: Environment) -> dict[str, Task]:
    """The bank's hand-written tasks by id."""
    return {t.id: t for t in load_tasks(BANK_DIR, bank_env.name, tools=bank_env.tools)}


async def _play(
    instance: Any,
    calls: list[tuple[str, dict[str, Any]]],
    answer: str,
    *,
    malformed: int = 0,
    instruction: str = "(task)",
) -> ReplayTranscript:
    """Make `calls` on `instance` as an agent would, then answer; returns the transcript."""
    messages = [Message(role="user", content=instruction)]
    for i, (name, args) in enumerate(calls):
        result = await instance.call(name, args)
        call = ToolCall(id=f"c{i}", name=name, arguments=args)
        messages.append(Message(role="assistant", tool_calls=[call]))
        content = json.dumps(result.output) if result.ok else f"error: {result.error}"
        messages.append(Message(role="tool", name=name, tool_call_id=call.id, content=content))
    messages.append(Message(role="assistant", content=answer))
    return ReplayTranscript(messages=messages, final_answer=answer, malformed_calls=malformed)


@pytest.fixture
def play() -> Callable[..., Awaitable[ReplayTranscript]]:
    """`await play(instance, [(tool, args), ...], answer, malformed=0, instruction=...)`: a scripted episode."""
    return _play
