"""What synthesis cost and what it kept: the `SynthesisReport`.

Every synthesis run fills one report: per stage (graph, walk, writer, gates, program, envgen steps
...) the helper-model calls, tokens and seconds, how many items entered the stage and how many it
accepted, plus rejections counted per gate or reason. Callers pass an observer (`on_report`) to
export it; ops turns it into metrics, the CLI prints it with `--json`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from pydantic import BaseModel, Field

from arena.protocols import ChatModel
from arena.types import Completion, Message, SamplingParams, ToolSpec


class StageCost(BaseModel):
    """Cost and acceptance of one stage."""

    model_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    attempted: int = 0
    accepted: int = 0


ReportObserver = Callable[["SynthesisReport"], None]


class SynthesisReport(BaseModel):
    """One synthesis run: what was asked, what was kept, why the rest was rejected, what it cost."""

    env: str
    kind: str
    requested: int = 0
    kept: int = 0
    attempts: int = 0
    rejections: dict[str, int] = Field(default_factory=dict)
    # Per non-working agent of the adversary gate: tasks it earned nothing on ("held"), tasks it
    # earned reward on ("paid", each one rejected), tasks it did not apply to ("n/a").
    adversaries: dict[str, dict[str, int]] = Field(default_factory=dict)
    stages: dict[str, StageCost] = Field(default_factory=dict)
    seconds: float = 0.0

    def reject(self, reason: str) -> None:
        """Count one rejection."""
        self.rejections[reason] = self.rejections.get(reason, 0) + 1

    def count_adversaries(self, agents: Iterable[Any]) -> None:
        """Count one task's adversary-gate outcome per agent (`AdversaryResult`s)."""
        for agent in agents:
            outcome = "paid" if agent.paid else "held" if agent.applies else "n/a"
            counts = self.adversaries.setdefault(agent.agent, {})
            counts[outcome] = counts.get(outcome, 0) + 1

    def stage(self, name: str) -> StageCost:
        """The cost record of a stage (created on first use)."""
        return self.stages.setdefault(name, StageCost())

    @property
    def model_calls(self) -> int:
        """Helper-model calls over every stage."""
        return sum(s.model_calls for s in self.stages.values())

    @property
    def tokens(self) -> int:
        """Prompt plus completion tokens over every stage."""
        return sum(s.prompt_tokens + s.completion_tokens for s in self.stages.values())

    def finish(self, kept: int, started: float, on_report: ReportObserver | None) -> None:
        """Close the report (kept count, wall time since `started`) and hand it to the observer."""
        self.kept = kept
        self.seconds = time.perf_counter() - started
        if on_report is not None:
            on_report(self)

    def summary(self) -> dict[str, Any]:
        """The report plus totals, as plain JSON."""
        return {**self.model_dump(mode="json"), "model_calls": self.model_calls, "tokens": self.tokens}


class StageMeter:
    """Times stages and counts helper calls into a report."""

    def __init__(self, report: SynthesisReport) -> None:
        self.report = report
        self.current = "other"

    @contextmanager
    def timed(self, name: str) -> Iterator[StageCost]:
        """Add the block's wall time to stage `name`; model calls inside are charged to it."""
        cost = self.report.stage(name)
        previous, self.current = self.current, name
        start = time.perf_counter()
        try:
            yield cost
        finally:
            cost.seconds += time.perf_counter() - start
            self.current = previous

    async def chat(
        self,
        model: ChatModel,
        messages: list[Message],
        *,
        tools: list[ToolSpec] | None = None,
        params: SamplingParams | None = None,
        stage: str | None = None,
    ) -> Completion:
        """`model.chat(...)`, counted against `stage` (default: the current timed stage)."""
        cost = self.report.stage(stage or self.current)
        cost.model_calls += 1
        completion = await model.chat(messages, tools=tools, params=params)
        cost.prompt_tokens += completion.usage.prompt_tokens
        cost.completion_tokens += completion.usage.completion_tokens
        return completion
