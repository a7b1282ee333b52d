"""Builders of tasks, transcripts and verdicts for diagnosis tests (plain data, no model).

Tests get them through the `b` fixture (tests run with `--import-mode=importlib`, so a test
module cannot import this conftest).
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from arena.env.instance import ToolResult
from arena.episode.parser import MalformedCall
from arena.episode.transcript import CallRecord, MalformedRecord, Transcript, TurnRecord
from arena.tasks.model import AnswerCheck, StateMatchCheck, Task
from arena.tasks.reward import CheckResult, Verdict
from arena.types import ToolCall
from diagnose.evidence import EnvMeta, EpisodeInput

SHOP = EnvMeta(
    name="shop",
    title="Shop",
    category=["Shopping", "Orders"],
    tools=["get_order", "list_orders", "cancel_order", "update_address"],
    write_tools=["cancel_order", "update_address"],
)
BANK = EnvMeta(
    name="bank",
    title="Bank",
    category=["Finance", "Banking"],
    tools=["list_accounts", "transfer"],
    write_tools=["transfer"],
)


def task(
    env: str = "shop", reference: list[tuple[str, dict[str, Any]]] | None = None, tid: str = "t1"
) -> Task:
    ref = (
        reference
        if reference is not None
        else [("get_order", {"order_id": "O-1"}), ("cancel_order", {"order_id": "O-1"})]
    )
    return Task(
        id=tid,
        env=env,
        instruction="Please cancel my order O-1.",
        reference=[ToolCall(name=n, arguments=a) for n, a in ref],
        checks=[StateMatchCheck(), AnswerCheck(contains=["cancel"])],
    )


def call(
    tool: str,
    args: dict[str, Any] | None = None,
    *,
    ok: bool = True,
    kind: str | None = None,
    writes: bool = False,
    output: Any = None,
    turn: int = 0,
) -> CallRecord:
    result = ToolResult(
        tool=tool,
        ok=ok,
        output=output if ok else None,
        error=None if ok else f"{tool} failed",
        error_kind=None if ok else (kind or "tool_error"),
        writes=writes,
    )
    return CallRecord(turn=turn, call=ToolCall(name=tool, arguments=args or {}), result=result)


def transcript(
    calls: list[CallRecord] = (),  # type: ignore[assignment]
    *,
    finish: str = "answered",
    malformed: list[tuple[str, str | None]] = (),  # type: ignore[assignment]
    answer: str = "Done.",
    env: str = "shop",
) -> Transcript:
    errors = [
        MalformedRecord(turn=0, error=MalformedCall(kind=k, message=f"{k} error", name=n))
        for k, n in malformed
    ]
    turns = max([c.turn for c in calls] + [0]) + 1
    return Transcript(
        task_id="t1",
        env=env,
        calls=list(calls),
        malformed_errors=errors,
        malformed_calls=len(errors),
        finish=finish,  # type: ignore[arg-type]
        final_answer=answer,
        turns=[TurnRecord(index=i, text="", content="") for i in range(turns)],
    )


def verdict(passed: bool = False, *, state: bool = False, answer: bool = False) -> Verdict:
    checks = [
        CheckResult(kind="state_match", name="state", passed=state or passed, detail="x"),
        CheckResult(kind="answer", name="answer", passed=answer or passed, detail="y"),
    ]
    reward = sum(c.passed for c in checks) / len(checks)
    return Verdict(reward=reward, passed=passed, checks=checks)


def episode(eid: str, tr: Transcript, v: Verdict, t: Task | None = None, env: str = "shop") -> EpisodeInput:
    return EpisodeInput(episode_id=eid, env=env, task=t or task(env), transcript=tr, verdict=v)


@pytest.fixture
def b() -> SimpleNamespace:
    """The builders above, plus the SHOP and BANK environment metadata."""
    return SimpleNamespace(
        SHOP=SHOP, BANK=BANK, task=task, call=call, transcript=transcript, verdict=verdict, episode=episode
    )


@pytest.fixture
def anyio_backend() -> str:
    """The diagnosis runs on asyncio (the local model backend and the sandbox pool need it)."""
    return "asyncio"
