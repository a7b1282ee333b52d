"""One BFCL multi-turn entry played by a policy, the way BFCL's harness plays it.

- The entry's user turns come in order; between them the policy takes steps. A step's tool calls
  (Hermes `<tool_call>` blocks or native calls, any name: an unknown one gets BFCL's error result)
  run on the entry's instances, in order, and their results go back as tool messages.
- A turn ends when a step has no call, or when its output does not decode (a malformed call:
  nothing of that step runs, as a BFCL decoder fails the whole step).
- More than `max_steps_per_turn` steps with calls in one turn ends the whole entry
  (`force_terminated`); its later turns are not played and it scores 0.
- `miss_func`: a held-out function is not among the tools until its turn, which has no user
  message in the data: the agent is told that new tools are there.
- `long_context` entries load the backend's long states.
- Calls that break a sandbox limit (CPU, memory, wall time: `ARENA_SANDBOX=all`) end the entry
  (`env_error`); it scores 0.

The result is the decoded trajectory (`decoded`: per turn, per step, call expressions), which is
what `arena.public.bfcl.checker.score` takes, and a readable log.
"""

from __future__ import annotations

import time
from typing import Literal

from pydantic import BaseModel, Field

from arena.env.object_calls import call_text
from arena.env.object_runtime import ObjectRunner
from arena.episode.parser import clean_text, native_tool_calls, parse_tool_calls
from arena.episode.prompts import build_system_prompt
from arena.protocols import ChatModel, ModelError
from arena.public.bfcl.model import MAX_STEPS_PER_TURN, BfclBenchmark, BfclEntry
from arena.sandbox.models import SandboxProgramError, SandboxViolation
from arena.types import Message, SamplingParams

# What the agent reads in a miss_func entry's holdout turn (BFCL's data has no message there).
NEW_TOOLS_MESSAGE = "More tools are available to you now. Use them to finish what I asked earlier."


class EpisodeLimits(BaseModel):
    """Caps of one entry (BFCL's step cap by default) and the policy's sampling."""

    max_steps_per_turn: int = Field(default=MAX_STEPS_PER_TURN, ge=1)
    max_tokens_per_step: int = Field(default=256, ge=1)
    temperature: float = Field(default=0.0, ge=0.0)


class StepLog(BaseModel):
    """One policy step: its visible text, the calls it made and their results."""

    text: str = ""
    calls: list[str] = Field(default_factory=list)
    results: list[str] = Field(default_factory=list)
    malformed: list[str] = Field(default_factory=list)


class EntryRun(BaseModel):
    """A played entry: the decoded trajectory for scoring, the steps for reading."""

    entry_id: str
    category: str
    decoded: list[list[list[str]]] = Field(default_factory=list)
    steps: list[list[StepLog]] = Field(default_factory=list)
    finish: Literal["completed", "force_terminated", "model_error", "env_error"] = "completed"
    detail: str = ""
    seconds: float = 0.0

    @property
    def calls(self) -> int:
        """Calls the policy made."""
        return sum(len(step) for turn in self.decoded for step in turn)


def _user_messages(turn: list[dict[str, object]]) -> list[Message]:
    """A turn's messages from the data (user ones; a system one stays a system message)."""
    return [
        Message(role="system" if m.get("role") == "system" else "user", content=str(m.get("content", "")))
        for m in turn
    ]


async def run_entry(
    policy: ChatModel,
    bench: BfclBenchmark,
    entry: BfclEntry,
    runner: ObjectRunner,
    limits: EpisodeLimits | None = None,
) -> EntryRun:
    """Play `entry` with `policy`; never raises for the policy's faults (a `ModelError` ends it)."""
    limits = limits or EpisodeLimits()
    params = SamplingParams(temperature=limits.temperature, max_tokens=limits.max_tokens_per_step)
    run = EntryRun(entry_id=entry.id, category=entry.category)
    session = runner.session(
        entry.involved_classes, entry.initial_config, {"long_context": entry.long_context}
    )
    messages = [Message(role="system", content=build_system_prompt())]
    started = time.perf_counter()
    try:
        for index, turn in enumerate(entry.turns):
            tools = bench.tools_at(entry, index)
            said = _user_messages(turn)
            if not said and index in entry.missed_function:
                said = [Message(role="user", content=NEW_TOOLS_MESSAGE)]
            messages += said
            decoded, steps = [], []
            while True:
                completion = await policy.chat(messages, tools=tools, params=params)
                if completion.tool_calls:
                    parsed = native_tool_calls(completion.tool_calls, content=completion.text)
                else:
                    parsed = parse_tool_calls(completion.text)
                step = StepLog(text=parsed.content, malformed=[e.message for e in parsed.errors])
                steps.append(step)
                if parsed.errors or not parsed.calls:
                    # No call, or output that does not decode: the turn is over, nothing runs.
                    messages.append(Message(role="assistant", content=clean_text(completion.text)))
                    break
                messages.append(Message(role="assistant", content=parsed.content, tool_calls=parsed.calls))
                step.calls = [call_text(c.name, c.arguments) for c in parsed.calls]
                try:
                    step.results = await session.step(step.calls)
                except (SandboxViolation, SandboxProgramError) as exc:  # the calls broke a sandbox limit
                    run.finish, run.detail = "env_error", f"turn {index}: {type(exc).__name__}: {exc}"
                    break
                messages += [
                    Message(role="tool", content=clean_text(result), tool_call_id=call.id, name=call.name)
                    for call, result in zip(parsed.calls, step.results, strict=True)
                ]
                decoded.append(step.calls)
                if len(decoded) > limits.max_steps_per_turn:
                    run.finish = "force_terminated"
                    run.detail = f"turn {index}: more than {limits.max_steps_per_turn} steps with calls"
                    break
            run.decoded.append(decoded)
            run.steps.append(steps)
            if run.finish != "completed":
                break
    except ModelError as exc:
        run.finish = "model_error"
        run.detail = str(exc) or type(exc).__name__
    run.seconds = time.perf_counter() - started
    return run
