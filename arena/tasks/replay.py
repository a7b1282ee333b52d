"""Replaying a task's reference solution on a fresh environment instance.

Used by the gold gate, by `state_match` (the expected final state) and by task synthesis (which
replays a candidate's calls to see what they do). Environments are duck-typed against the
runtime's contract (`new_instance()`, async `call()`, `snapshot()`, `aclose()`), so this module
does not import the runtime.
"""

from __future__ import annotations

import sqlite3
from typing import Any, Protocol

from arena.tasks.model import Task


class ToolResultLike(Protocol):
    """The parts of `arena.env.runtime.ToolResult` a replay reads."""

    tool: str
    ok: bool
    output: Any
    error: str | None


class ReferenceReplayError(Exception):
    """A reference call failed, or the environment cannot replay (e.g. it is simulated)."""


def new_instance(env: Any, sandbox: Any = None) -> Any:
    """A fresh instance; a sandboxed (synthesized) environment's tools run in `sandbox`.

    The sandbox goes only to environments that need it: handing one to an in-process environment
    would move its tools into the sandbox too, which costs a worker round trip per call.
    Raises `ReferenceReplayError` when the environment needs a sandbox and none is given.
    """
    if not getattr(env, "sandboxed", False):
        return env.new_instance()
    if sandbox is None:
        raise ReferenceReplayError(
            f"environment {env.name!r} runs its tools in the sandbox, and none was given"
        )
    return env.new_instance(sandbox=sandbox)


async def replay_reference(env: Any, task: Task, *, sandbox: Any = None) -> tuple[Any, list[ToolResultLike]]:
    """Run the task's reference calls, in order, on a fresh instance of `env`.

    Returns the instance (the caller closes it with `await instance.aclose()`) and one tool result
    per reference call. A failing call does not stop the replay; the caller decides what a failed
    result means (the gold gate rejects the task). `sandbox` is needed by sandboxed environments.
    """
    if getattr(env, "kind", "executable") != "executable":
        raise ReferenceReplayError(f"environment {env.name!r} is {env.kind}; only executable ones replay")
    instance = new_instance(env, sandbox)
    results: list[ToolResultLike] = []
    try:
        for call in task.reference:
            results.append(await instance.call(call.name, dict(call.arguments)))
    except BaseException:
        await instance.aclose()
        raise
    return instance, results


def first_failure(results: list[ToolResultLike]) -> str | None:
    """A one-line description of the first failed reference call, or None when all succeeded."""
    for i, result in enumerate(results, start=1):
        if not result.ok:
            return f"reference call {i} ({result.tool}) failed: {result.error}"
    return None


async def reference_state(env: Any, task: Task, *, sandbox: Any = None) -> sqlite3.Connection:
    """The final state of the reference solution, as an in-memory connection.

    Deterministic (tools take time and ids from the handle), so callers verifying many samples of
    one task compute it once and pass it to `verify(..., expected_state=...)`.
    Raises `ReferenceReplayError` when a reference call fails.
    """
    instance, results = await replay_reference(env, task, sandbox=sandbox)
    try:
        problem = first_failure(results)
        if problem is not None:
            raise ReferenceReplayError(f"{task.full_id}: {problem}")
        return instance.snapshot()
    finally:
        await instance.aclose()
