"""The adversary gate: every task is scored against agents that do not do the work (DESIGN §4).

GRPO finds every reward that can be had without the work, so a task is usable only when each of
these non-working agents earns exactly 0 on it:

- `empty`: no call, an empty answer;
- `answer_no_call`: no call, the reference answer;
- `values_done`: no call, every value the answer checks expect joined after "Done:";
- `reads_only`: the reference's read calls (none of its writes), then the reference answer;
- `drop_last_write`: the reference without its last write, then the reference answer;
- `wrong_row`: the reference with one write aimed at another row of the same table (another
  value of the column the argument comes from, one the episode showed first, then the rows most
  like the reference's; the first the tool accepts), then the reference answer;
- `writes_without_lookups`: the reference's writes with the reference's arguments and none of
  its look-ups, then the reference answer (it applies where a write names a row that the user's
  words and the rules do not give: the agent that learned the seed database's ids by heart);
- `extra_write`: the reference, then one more successful write that changes another row (a
  reference write aimed at another row, or repeated to add a row too many), then the reference
  answer: damage beside the task.

The agents after `values_done` need a task whose reference writes (`arena.tasks.adversary_calls`
builds their calls). An agent that does not apply is reported as such and cannot reject the
task. Agents that call tools run on fresh instances of an executable environment; on a simulated
one only the no-call agents run.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict

from arena.protocols import ChatModel
from arena.tasks.adversary_calls import (
    ADVERSARIES,
    CALLING,
    AdversaryName,
    Attempt,
    agent_answer,
    attempts,
    describe,
    values_answer,
    wrong_row_variants,
)
from arena.tasks.model import Task
from arena.tasks.normalize import normalize_text
from arena.tasks.provenance import Observations
from arena.tasks.replay import ReferenceReplayError, new_instance
from arena.tasks.reward import RewardConfig
from arena.tasks.transcript import ReplayTranscript
from arena.tasks.verify import CheckSandbox, UntouchedMemo, verify
from arena.types import Message, ToolCall

__all__ = [
    "ADVERSARIES",
    "AdversaryName",
    "AdversaryResult",
    "AdversaryRunner",
    "play_agent",
    "reference_view",
    "run_adversaries",
    "transcript_of",
    "values_answer",
    "wrong_row_variants",
]

T = TypeVar("T")
# Why a calling agent does not apply to a task whose reference writes.
_NOT_APPLICABLE: dict[str, str] = {
    "wrong_row": "no other row that a reference write accepts",
    "writes_without_lookups": "every row the writes name is in the user's words or the rules",
    "extra_write": "no other write that changes the state",
}


class AdversaryResult(BaseModel):
    """One non-working agent on one task: whether it applied, what it earned, why."""

    model_config = ConfigDict(frozen=True)

    agent: AdversaryName
    applies: bool
    reward: float = 0.0
    detail: str = ""
    # Set when the agent could not be scored (e.g. a sandboxed environment and no sandbox): a task
    # that cannot be shown safe is rejected like one that pays.
    error: str = ""

    @property
    def paid(self) -> bool:
        """Whether the agent earned anything, or could not be scored (the task is then rejected)."""
        return bool(self.error) or (self.applies and self.reward > 0)


def transcript_of(
    task: Task, calls: list[ToolCall], results: list[Any] | None, answer: str
) -> ReplayTranscript:
    """The transcript of an agent that makes `calls` (with their `results`), then answers `answer`.

    The user's words are the instruction and, for a conversational task, the intent a simulated
    user would reveal; `results` None (a simulated environment) shows placeholder results.
    """
    messages = [Message(role="user", content=task.instruction)]
    if task.mode == "conversational" and task.user is not None:
        messages.append(Message(role="user", content=task.user.intent))
    for i, call in enumerate(calls):
        call_id = f"call-{i + 1}"
        messages.append(
            Message(
                role="assistant", tool_calls=[ToolCall(id=call_id, name=call.name, arguments=call.arguments)]
            )
        )
        if results is None:
            content = "(simulated)"
        else:
            r = results[i]
            content = json.dumps(r.output, ensure_ascii=False, default=str) if r.ok else f"error: {r.error}"
        messages.append(Message(role="tool", name=call.name, tool_call_id=call_id, content=content))
    messages.append(Message(role="assistant", content=answer))
    return ReplayTranscript(messages=messages, final_answer=answer)


def reference_view(task: Task, results: list[Any]) -> Callable[[Any], bool]:
    """Whether the reference episode (its calls with these `results`) showed a value.

    It ranks the rows a swapping agent tries, so an approximation will do: the tokens shown.
    """
    tokens = Observations.of(transcript_of(task, task.reference, results, "")).identifiers()
    return lambda value: normalize_text(str(value)) in tokens


async def _reference_view(env: Any, task: Task, sandbox: Any) -> Callable[[Any], bool]:
    """`reference_view` from a fresh replay of the reference."""
    instance = new_instance(env, sandbox)
    try:
        results = [await instance.call(c.name, dict(c.arguments)) for c in task.reference]
    finally:
        await instance.aclose()
    return reference_view(task, results)


def _changed_by(instance: Any, before: bytes) -> bool:
    """Whether the instance's state differs from the image `before`.

    An in-memory database's image is byte-for-byte unchanged by a write that changed no row (an
    UPDATE to the same values), and changed by one that did; a write that deletes and re-inserts
    the same row could differ in bytes only, which at worst rejects a task that was fine.
    """
    return bool(instance.image() != before)


async def _try(env: Any, attempt: Attempt, sandbox: Any) -> tuple[Any, list[Any]] | None:
    """Run an attempt on a fresh instance: (instance, results), or None when it does not apply."""
    instance = new_instance(env, sandbox)
    try:
        results: list[Any] = []
        changed = True
        for index, call in enumerate(attempt.calls):
            before = instance.image() if attempt.must_change and index == attempt.probe else None
            results.append(await instance.call(call.name, dict(call.arguments)))
            if before is not None:
                changed = _changed_by(instance, before)
        applies = attempt.probe is None or (results[attempt.probe].ok and changed)
    except BaseException:
        await instance.aclose()
        raise
    if not applies:
        await instance.aclose()
        return None
    return instance, results


async def play_agent(
    env: Any,
    task: Task,
    agent: AdversaryName,
    score: Callable[[Any, ReplayTranscript], Awaitable[T]],
    *,
    sandbox: Any = None,
    shown: Callable[[Any], bool] | None = None,
) -> tuple[Attempt, T] | None:
    """Play one agent on `task` and `score(instance, transcript)` it; None when it does not apply.

    `instance` is None on a simulated environment (only the no-call agents play there). `shown`
    (computed from a reference replay when not given) steers row swaps to rows the episode showed.
    Raises `ReferenceReplayError` for a sandboxed environment without a sandbox.
    """
    answer = agent_answer(agent, task)
    executable = getattr(env, "kind", "executable") == "executable"
    if agent not in CALLING:
        instance = new_instance(env, sandbox) if executable else None
        try:
            return Attempt(calls=[]), await score(instance, transcript_of(task, [], [], answer))
        finally:
            if instance is not None:
                await instance.aclose()
    if not executable:
        return None
    if shown is None:
        shown = await _reference_view(env, task, sandbox)
    for attempt in attempts(agent, env, task, shown):
        tried = await _try(env, attempt, sandbox)
        if tried is None:
            continue
        instance, results = tried
        try:
            return attempt, await score(instance, transcript_of(task, attempt.calls, results, answer))
        finally:
            await instance.aclose()
    return None


class AdversaryRunner:
    """Scores the non-working agents on one task, sharing the verification settings."""

    def __init__(
        self,
        env: Any,
        task: Task,
        *,
        judge: ChatModel | None = None,
        sandbox: CheckSandbox | None = None,
        config: RewardConfig | None = None,
        expected_state: sqlite3.Connection | None = None,
        shown: Callable[[Any], bool] | None = None,
    ) -> None:
        self.env = env
        self.task = task
        self.sandbox = sandbox
        self.kwargs: dict[str, Any] = {
            "judge": judge,
            "sandbox": sandbox,
            "config": config,
            "env": env,
            "expected_state": expected_state,
            "memo": UntouchedMemo(),
        }
        self._shown = shown

    async def run(self, agent: AdversaryName) -> AdversaryResult:
        """Score one agent (inapplicable agents come back with `applies=False`)."""
        if (
            agent in CALLING
            and self._shown is None
            and getattr(self.env, "kind", "executable") == "executable"
        ):
            self._shown = await _reference_view(self.env, self.task, self.sandbox)

        async def score(instance: Any, transcript: ReplayTranscript) -> Any:
            return await verify(self.task, instance, transcript, **self.kwargs)

        played = await play_agent(self.env, self.task, agent, score, sandbox=self.sandbox, shown=self._shown)
        if played is None:
            writes = set(getattr(self.env, "write_tools", ()))
            why = (
                _NOT_APPLICABLE.get(agent, "") if self.task.writes(writes) else "the reference makes no write"
            )
            return AdversaryResult(agent=agent, applies=False, detail=why or "does not apply")
        attempt, verdict = played
        detail = verdict.summary()
        if attempt.probe is not None:
            detail = f"{describe(attempt.calls[attempt.probe])}: {detail}"
        return AdversaryResult(agent=agent, applies=True, reward=verdict.reward, detail=detail)

    async def run_all(self) -> list[AdversaryResult]:
        """Every agent, in `ADVERSARIES` order."""
        return [await self.run(agent) for agent in ADVERSARIES]


async def run_adversaries(env: Any, task: Task, **kwargs: Any) -> list[AdversaryResult]:
    """Score every non-working agent on `task` (keyword arguments as `AdversaryRunner`'s)."""
    try:
        return await AdversaryRunner(env, task, **kwargs).run_all()
    except ReferenceReplayError as exc:  # e.g. a sandboxed environment without a sandbox
        return [AdversaryResult(agent=a, applies=True, error=str(exc), detail=str(exc)) for a in ADVERSARIES]
