"""Task synthesis as requests that run wherever the episodes run: in the daemon or on cluster workers.

A `SynthesisRequest` names one environment's batch of synthesis (graph or targeted tasks through
their gates, or a simulated environment's generated tasks) by values only, so that it can cross
to a Ray worker: the environment, models and sandbox pool are those of the process that runs it
(`run_request`, given that process's `SynthesisSite`). Synthesis is deterministic in (environment,
seed, index), so a request a lost worker held runs again elsewhere with the same result.

This is the work a cluster worker runs (`ops.cluster.worker` imports it), so it imports nothing of
the daemon's side: where requests run and what the daemon alone does with an outcome (the gate
metrics, the yardstick exclusion, the store) are `ops.phases.synth_dispatch`'s.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ops.phases.base import PhaseContext
from ops.phases.synth_site import SynthesisSite

RequestKind = Literal["graph", "simulated_training", "simulated_eval"]


class SynthesisRequest(BaseModel):
    """One batch of tasks for one environment, described by values (see the module docstring)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    kind: RequestKind
    env: str
    n: int
    seed: int
    difficulty: Any = None  # arena.synth.graph_tasks.Difficulty (graph) or the simulated one
    guideline: Any = None  # arena.synth.targeted.Guideline: targeted graph tasks
    distractor_pool: list[str] = Field(default_factory=list)
    label: str | None = None  # the tasks' use in the metrics (default: their origin)
    writer: Literal["template", "model"] = "template"
    # Training tasks: every id a reference call uses comes from the instruction or an earlier
    # result (`arena.synth.walk.ungrounded_ids`), since SFT imitates the reference and GRPO's
    # groups need a task the policy can solve by looking things up.
    grounded: bool = False
    # Candidates to draw before giving up (default: `synthesis.max_attempts` per task).
    max_attempts: int | None = Field(default=None, ge=1)


class SynthesisOutcome(BaseModel):
    """What running a request produced: the tasks and, for graph synthesis, the gates' report."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    tasks: list[Any]
    report: Any = None  # arena.synth.reports.SynthesisReport (graph)
    summary: dict[str, Any] | None = None  # the simulated generator's report line


def graph_request(
    ctx: PhaseContext,
    env: str,
    n: int,
    *,
    seed: int,
    difficulty: Any = None,
    guideline: Any = None,
    distractor_pool: Sequence[str] = (),
    label: str | None = None,
    with_helper: bool,
    grounded: bool = False,
) -> SynthesisRequest:
    """A graph synthesis request; `with_helper` lets the configured writer use the helper model;
    `grounded` asks for references that look up every id they use (training tasks)."""
    return SynthesisRequest(
        kind="graph",
        env=env,
        n=n,
        seed=seed,
        difficulty=difficulty,
        guideline=guideline,
        distractor_pool=list(distractor_pool),
        label=label,
        writer=ctx.config.synthesis.writer if with_helper else "template",
        grounded=grounded,
    )


async def run_request(
    site: SynthesisSite, envs: dict[str, Any], request: SynthesisRequest, sandbox: Any
) -> SynthesisOutcome:
    """Synthesize `request` here: `site` gives the models, metrics, settings and round; `sandbox`
    the pool."""
    env = envs.get(request.env)
    if env is None:
        raise LookupError(f"no environment {request.env!r} to synthesize tasks for (DATA_DIR not shared?)")
    if request.kind == "simulated_training":
        from ops.phases.simulated_training_tasks import simulated_training_tasks

        reports: list[dict[str, Any]] = []
        tasks = await simulated_training_tasks(
            site, env, request.n, request.difficulty, seed=request.seed, reports=reports
        )
        return SynthesisOutcome(tasks=tasks, summary=reports[0] if reports else None)
    if request.kind == "simulated_eval":
        from ops.phases.eval_runner import simulated_tasks

        tasks = await simulated_tasks(
            site.models, site.round, env, request.n, request.difficulty, seed=request.seed
        )
        return SynthesisOutcome(tasks=tasks)
    return await _run_graph(site, env, request, sandbox)


async def _run_graph(
    site: SynthesisSite, env: Any, request: SynthesisRequest, sandbox: Any
) -> SynthesisOutcome:
    from arena.synth.filters import GateConfig
    from arena.synth.graph_tasks import synthesize_graph_tasks
    from arena.synth.targeted import guideline_bias

    if env.sandboxed and sandbox is not None:
        await env.describe(sandbox)  # a synthesized env's tool schemas and write tools (idempotent)
    helper = await site.models.helper() if request.writer == "model" else None
    kwargs: dict[str, Any] = {
        "seed": request.seed,
        "helper": helper,
        "writer": request.writer,
        "sandbox": sandbox if env.sandboxed else None,
        "gates": GateConfig(),
        "round_id": site.round,
        "max_attempts": request.max_attempts or max(8, request.n * site.synthesis.max_attempts),
        "distractor_pool": request.distractor_pool,
        "difficulty": request.difficulty,
        "grounded": request.grounded,
    }
    guideline = request.guideline
    if guideline is not None:
        kwargs |= {
            "difficulty": guideline.difficulty,
            "bias": guideline_bias(env, guideline),
            "guidance": " ".join(
                p for p in (guideline.failure_pattern.strip(), guideline.skill.strip()) if p
            ),
            "origin": "targeted",
        }
    result = await synthesize_graph_tasks(env, request.n, **kwargs)
    return SynthesisOutcome(tasks=list(result.tasks), report=result.report)
