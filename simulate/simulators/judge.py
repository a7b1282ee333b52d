"""The judge: scores a trajectory against the user's intent or a rubric, per criterion and overall.

It reuses the rubric prompt and answer shape of `arena.tasks.judge` (one verdict per numbered
criterion, reason first) through the shared validate-and-retry helper. Without explicit criteria
it judges against default criteria derived from the intent. The overall score is the fraction of
criteria met; `passed` means all were.

`TrajectoryJudge` is also a `ChatModel` (it forwards `chat` to its model under the `judge` role),
so it can be handed to `arena.tasks.verify(..., judge=...)` where rubric checks expect a judge.
"""

from __future__ import annotations

import copy
from typing import Any

from pydantic import BaseModel, Field

from arena.protocols import ChatModel
from arena.tasks.judge import JudgeOutput, judge_messages, judge_schema
from arena.tasks.transcript import TranscriptLike, render_transcript
from arena.types import Completion, Message, SamplingParams, ToolSpec
from simulate.calls import model_role
from simulate.simulators.common import SimulatorSettings, structured_call


def default_criteria(intent: str) -> list[str]:
    """The criteria used when a task has no rubric: did the agent do what the intent asks."""
    return [
        f"The agent accomplished the user's goal: {intent.strip()}",
        "The agent's final reply to the user states the outcome truthfully, consistent with the tool results.",
    ]


class CriterionScore(BaseModel):
    """The judge's verdict on one criterion."""

    criterion: str
    passed: bool
    reason: str = ""


class JudgeScore(BaseModel):
    """A judged trajectory: per-criterion verdicts, the fraction met and whether all were."""

    criteria: list[CriterionScore]
    overall: float = Field(ge=0.0, le=1.0)
    passed: bool
    attempts: int = 1


class TrajectoryJudge:
    """Judges trajectories with a helper model; usable as the `judge` of `arena.tasks.verify`."""

    def __init__(
        self, model: ChatModel, settings: SimulatorSettings | None = None, *, reason_chars: int = 80
    ) -> None:
        self.model = model
        self.name = getattr(model, "name", "judge")
        self.settings = settings or SimulatorSettings(max_tokens=200)
        self.reason_chars = reason_chars

    async def chat(
        self,
        messages: list[Message],
        *,
        tools: list[ToolSpec] | None = None,
        params: SamplingParams | None = None,
    ) -> Completion:
        """Forward to the model, counted under the `judge` role (so rubric checks can use this judge)."""
        with model_role("judge"):
            return await self.model.chat(messages, tools=tools, params=params)

    def schema(self, n: int) -> dict[str, Any]:
        """The answer schema for `n` criteria (the rubric schema with shorter reasons)."""
        schema = copy.deepcopy(judge_schema(n))
        schema["properties"]["verdicts"]["items"]["properties"]["reason"]["maxLength"] = self.reason_chars
        return schema

    async def score(
        self, intent: str, transcript: TranscriptLike, criteria: list[str] | None = None
    ) -> JudgeScore:
        """Judge `transcript` against `criteria` (default: the intent). Raises `SimulatorError`."""
        crits = [c for c in (criteria or default_criteria(intent)) if c.strip()]
        if not crits:
            raise ValueError("the judge needs at least one criterion")
        n = len(crits)

        def check(out: JudgeOutput) -> None:
            seen = sorted(v.criterion for v in out.verdicts)
            if seen != list(range(1, n + 1)):
                raise ValueError(f"verdicts cover criteria {seen}, expected 1..{n} once each")

        messages = judge_messages(intent, render_transcript(transcript, max_chars=3000), crits)
        out, info = await structured_call(
            self.model,
            messages,
            JudgeOutput,
            self.schema(n),
            simulator="judge",
            settings=self.settings,
            check=check,
        )
        by_index = {v.criterion: v for v in out.verdicts}
        scores = [
            CriterionScore(criterion=c, passed=by_index[i].passed, reason=by_index[i].reason.strip())
            for i, c in enumerate(crits, start=1)
        ]
        met = sum(s.passed for s in scores)
        return JudgeScore(criteria=scores, overall=met / n, passed=met == n, attempts=info.attempts)
