"""Targeted synthesis: a diagnosis guideline steers the graph walk toward the tools an agent fails on."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from arena.difficulty import Difficulty
from arena.protocols import ChatModel
from arena.synth.cost import ReportObserver
from arena.synth.filters import GateConfig
from arena.synth.graph_tasks import SynthesisResult, WriterKind, synthesize_graph_tasks
from arena.synth.motifs import MotifName


class Guideline(BaseModel):
    """A task-generation guideline for one environment (produced by the diagnosis phase).

    `target_tools` are the tools the synthesized tasks should exercise; `failure_pattern` and
    `skill` describe, in words, what the agent gets wrong and what the tasks should practise;
    `motif` (from `arena.synth.motifs`) names the shape of work that transfers across environments,
    and targeted tasks are counted by it.
    """

    model_config = ConfigDict(extra="forbid")

    env: str = Field(min_length=1)
    failure_pattern: str = ""
    target_tools: list[str] = Field(default_factory=list)
    skill: str = ""
    motif: MotifName | None = None
    difficulty: Difficulty = Field(default_factory=Difficulty)
    n_tasks: int = Field(default=10, ge=1, le=10_000)

    @field_validator("target_tools")
    @classmethod
    def _once_each(cls, tools: list[str]) -> list[str]:
        # A small model's constrained answer repeats items ("search_restaurants" four times);
        # the bias weighs each tool once, and the operator reads each name once.
        return list(dict.fromkeys(tools))


TARGET_BIAS = 8.0


def guideline_bias(env: Any, guideline: Guideline) -> dict[str, float]:
    """Walk-weight multipliers for the guideline's target tools; unknown tools are an error."""
    unknown = [t for t in guideline.target_tools if t not in env.tool_names]
    if unknown:
        raise ValueError(
            f"guideline for {guideline.env!r} names unknown tool(s) {', '.join(unknown)}; "
            f"tools are: {', '.join(env.tool_names)}"
        )
    return dict.fromkeys(guideline.target_tools, TARGET_BIAS)


async def synthesize_targeted(
    env: Any,
    guideline: Guideline,
    *,
    seed: int = 0,
    helper: ChatModel | None = None,
    writer: WriterKind = "template",
    sandbox: Any = None,
    gates: GateConfig | None = None,
    round_id: int | None = None,
    distractor_pool: Sequence[str] = (),
    on_report: ReportObserver | None = None,
) -> SynthesisResult:
    """`guideline.n_tasks` tasks steered toward the guideline's tools, difficulty and failure pattern.

    The target tools get a walk weight of `TARGET_BIAS` (start, edges and prerequisites), a target
    read may be the walk's goal, and the model writer is told the failure pattern and skill.
    """
    if guideline.env != env.name:
        raise ValueError(f"guideline is for {guideline.env!r}, not {env.name!r}")
    guidance = " ".join(p for p in (guideline.failure_pattern.strip(), guideline.skill.strip()) if p)
    return await synthesize_graph_tasks(
        env,
        guideline.n_tasks,
        seed=seed,
        difficulty=guideline.difficulty,
        helper=helper,
        writer=writer,
        sandbox=sandbox,
        gates=gates,
        bias=guideline_bias(env, guideline),
        guidance=guidance,
        origin="targeted",
        round_id=round_id,
        distractor_pool=distractor_pool,
        on_report=on_report,
    )
