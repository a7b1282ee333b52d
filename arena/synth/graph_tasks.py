"""Graph-based task synthesis: walk, execute, write, check, gate.

`synthesize_graph_tasks(env, n)` keeps drawing candidates (task ids are deterministic from the
environment, the seed and the candidate index) until `n` pass every gate or the attempt budget is
spent. Each candidate is a planned walk executed on a private copy (the reference calls and their
results), an instruction from the template writer or the helper model (falling back to the
template when the model's is rejected), and checks: `state_match`, `answer` with values from the
final result, and `rubric` when a helper is configured.
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from typing import Any, Literal

import structlog
from pydantic import BaseModel

from arena.difficulty import Difficulty
from arena.protocols import ChatModel, UserContext, UserSimulator
from arena.synth.cost import ReportObserver, StageMeter, SynthesisReport
from arena.synth.filters import GateConfig, TaskFilter
from arena.synth.graph import ToolGraph, build_graph
from arena.synth.walk import Walk, execute_walk, plan_walk, ungrounded_ids
from arena.synth.writer import TaskDraft, model_draft, template_draft, validate_instruction
from arena.tasks.model import (
    ActionCheck,
    AnswerCheck,
    Check,
    ExpectedCall,
    RubricCheck,
    StateMatchCheck,
    Task,
)
from arena.types import ToolCall

log = structlog.get_logger(__name__)

WriterKind = Literal["template", "model"]
TARGET_BIAS = 8.0


class SynthesisResult(BaseModel):
    """The kept tasks and the run's report."""

    tasks: list[Task]
    report: SynthesisReport


def task_id(prefix: str, seed: int, index: int) -> str:
    """Deterministic id from (seed, index); unique per environment and prefix."""
    return f"{prefix}-s{seed}-{index:05d}"


def candidate_rng(env_name: str, seed: int, index: int) -> random.Random:
    """The random stream of one candidate: same (env, seed, index), same candidate."""
    return random.Random(f"{env_name}:{seed}:{index}")


def build_task(
    env: Any,
    walk: Walk,
    draft: TaskDraft,
    difficulty: Difficulty,
    *,
    tid: str,
    origin: Literal["graph", "targeted"],
    rubric: bool,
    distractors: list[str],
    round_id: int | None,
) -> Task:
    """The task for an executed walk and its draft."""
    checks: list[Check] = [StateMatchCheck()]
    if walk.writes_cancel_out:
        calls = [ExpectedCall(tool=s.tool, args=s.arguments) for s in walk.steps if s.writes]
        checks.append(ActionCheck(name="makes the reference's writes, in order", calls=calls))
    if draft.answer_values:
        checks.append(AnswerCheck(name="reports the requested details", contains=draft.answer_values))
    # Rubric criteria come from the helper's own draft: template fallbacks add none (a judge call
    # per gate for boilerplate criteria would cost more than it checks).
    if rubric and draft.rubric and draft.writer == "model":
        checks.append(RubricCheck(criteria=draft.rubric))
    conversational = difficulty.conversational == 1
    user = UserContext(intent=draft.intent, persona=draft.persona, ambiguity=difficulty.ambiguity / 2)
    return Task(
        id=tid,
        env=env.name,
        env_version=env.version,
        instruction=f"Hi, I need some help with my {env.title} account."
        if conversational
        else draft.instruction,
        mode="conversational" if conversational else "autonomous",
        user=user if conversational else None,
        answer=draft.answer,
        reference=[ToolCall(name=s.tool, arguments=s.arguments) for s in walk.steps],
        checks=checks,
        difficulty=difficulty.as_dict(),
        origin=origin,
        round=round_id,
        distractor_tools=distractors,
    )


def _walk_problem(walk: Walk, difficulty: Difficulty, planned_write: bool) -> str | None:
    if not walk.steps:
        return "no call of the walk succeeded"
    if difficulty.walk_length >= 2 and len(walk.steps) < 2:
        return "fewer than two calls succeeded"
    if planned_write and not walk.has_write:
        return "no write succeeded"
    return None


async def synthesize_graph_tasks(
    env: Any,
    n: int,
    *,
    seed: int = 0,
    difficulty: Difficulty | None = None,
    helper: ChatModel | None = None,
    writer: WriterKind = "template",
    sandbox: Any = None,
    gates: GateConfig | None = None,
    bias: dict[str, float] | None = None,
    guidance: str = "",
    origin: Literal["graph", "targeted"] = "graph",
    distractor_pool: Sequence[str] = (),
    round_id: int | None = None,
    max_attempts: int | None = None,
    agent: ChatModel | None = None,
    user: UserSimulator | None = None,
    writer_max_tokens: int = 320,
    on_report: ReportObserver | None = None,
    graph: ToolGraph | None = None,
    grounded: bool = False,
) -> SynthesisResult:
    """Up to `n` gated graph tasks for an executable environment.

    `writer="model"` needs `helper`; the helper also judges the rubric checks it adds. `bias`
    multiplies the walk weights of the named tools (targeted synthesis). `distractor_pool` holds
    `ENV/TOOL` names from other environments for the `distractors` knob. `grounded` rejects
    candidates whose reference uses an id that neither the instruction nor an earlier call's result
    gives (`ungrounded_ids`): tasks whose reference trajectories are training data need it.
    """
    if writer == "model" and helper is None:
        raise ValueError("writer='model' needs a helper model")
    difficulty = difficulty or Difficulty()
    report = SynthesisReport(env=env.name, kind=origin, requested=n)
    meter = StageMeter(report)
    started = time.perf_counter()
    with meter.timed("graph"):
        if graph is None:
            graph = await build_graph(env, sandbox=sandbox, helper=helper, meter=meter)
    unknown = [t for t in (bias or {}) if t not in graph.nodes]
    if unknown:
        raise ValueError(f"environment {env.name!r} has no tool(s) {', '.join(unknown)}")
    # The tools a targeted walk aims at: their optional constraints get filled (see `choose_args`).
    targets = {t for t, w in (bias or {}).items() if w > 1.0}
    use_rubric = helper is not None
    gate = TaskFilter(
        env,
        gates,
        judge=helper if use_rubric else None,
        sandbox=sandbox,
        report=report,
        agent=agent,
        user=user,
    )
    prefix = "t" if origin == "targeted" else "g"
    tasks: list[Task] = []
    budget = max_attempts if max_attempts is not None else max(8, n * 8)
    index = 0
    while len(tasks) < n and index < budget:
        rng = candidate_rng(env.name, seed, index)
        tid = task_id(prefix, seed, index)
        index += 1
        report.attempts += 1
        with meter.timed("walk") as cost:
            cost.attempted += 1
            plan = plan_walk(graph, rng, difficulty, bias)
            walk = await execute_walk(env, graph, plan, rng, difficulty, sandbox=sandbox, eager=targets)
            problem = _walk_problem(walk, difficulty, any(graph.nodes[t].writes for t in plan))
            if problem is not None:
                report.reject("walk")
                continue
            cost.accepted += 1
        with meter.timed("writer") as cost:
            cost.attempted += 1
            draft = template_draft(env, graph, walk, difficulty, rng)
            template_problem = validate_instruction(draft.instruction, env, graph, draft, walk, difficulty)
            if template_problem is not None:
                report.reject("writer")
                log.debug("template_rejected", env=env.name, problem=template_problem)
                continue
            if writer == "model":
                assert helper is not None
                draft, why = await model_draft(
                    helper,
                    env,
                    graph,
                    walk,
                    difficulty,
                    draft,
                    meter,
                    max_tokens=writer_max_tokens,
                    guidance=guidance,
                )
                if why is not None:
                    report.reject("model_instruction_fallback")
            if grounded and (missing := ungrounded_ids(walk, draft.instruction)):
                report.reject("ungrounded")
                log.debug("ungrounded_reference", env=env.name, ids=missing)
                continue
            cost.accepted += 1
        k = difficulty.distractors * 2
        distractors = sorted(rng.sample(list(distractor_pool), min(k, len(distractor_pool)))) if k else []
        try:
            task = build_task(
                env,
                walk,
                draft,
                difficulty,
                tid=tid,
                origin=origin,
                rubric=use_rubric,
                distractors=distractors,
                round_id=round_id,
            )
        except ValueError as exc:  # a check the model model rejects (blank values, ...)
            report.reject("writer")
            log.debug("task_invalid", env=env.name, error=str(exc)[:200])
            continue
        if await gate.admit(task, meter):
            tasks.append(task)
    report.finish(len(tasks), started, on_report)
    log.info(
        "graph_tasks_synthesized",
        env=env.name,
        kept=len(tasks),
        requested=n,
        attempts=report.attempts,
        rejections=report.rejections,
    )
    return SynthesisResult(tasks=tasks, report=report)
