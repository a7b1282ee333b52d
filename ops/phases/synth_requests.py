"""Task synthesis as requests that run wherever the episodes run: in the daemon or on cluster workers.

A `SynthesisRequest` names one environment's batch of synthesis (graph or targeted tasks through
their gates, or a simulated environment's generated tasks) by values only, so that it can cross
to a Ray worker: the environment, models and sandbox pool are those of the process that runs it
(`run_request`). What the daemon alone may do happens in `accept_outcome`: the gate metrics, the
exclusion of tasks that repeat a yardstick task (a store read), the round's report. Synthesis is
deterministic in (environment, seed, index), so a request a lost worker held runs again elsewhere
with the same result.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Literal

import anyio
import structlog
from pydantic import BaseModel, ConfigDict, Field

from ops.phases.base import PhaseContext, StopRequested
from ops.phases.runtime import record_synthesis
from ops.phases.tasks import save_tasks

log = structlog.get_logger(__name__)

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


RequestRunner = Callable[[SynthesisRequest], Awaitable[SynthesisOutcome]]


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
    ctx: PhaseContext, envs: dict[str, Any], request: SynthesisRequest, sandbox: Any
) -> SynthesisOutcome:
    """Synthesize `request` here: `ctx` gives the models, config and round; `sandbox` the pool."""
    env = envs.get(request.env)
    if env is None:
        raise LookupError(f"no environment {request.env!r} to synthesize tasks for (DATA_DIR not shared?)")
    if request.kind == "simulated_training":
        from ops.phases.cheap_tasks import simulated_training_tasks

        reports: list[dict[str, Any]] = []
        tasks = await simulated_training_tasks(
            ctx, env, request.n, request.difficulty, seed=request.seed, reports=reports
        )
        return SynthesisOutcome(tasks=tasks, summary=reports[0] if reports else None)
    if request.kind == "simulated_eval":
        from ops.phases.eval_runner import simulated_tasks

        tasks = await simulated_tasks(ctx, env, request.n, request.difficulty, seed=request.seed)
        return SynthesisOutcome(tasks=tasks)
    return await _run_graph(ctx, env, request, sandbox)


async def _run_graph(
    ctx: PhaseContext, env: Any, request: SynthesisRequest, sandbox: Any
) -> SynthesisOutcome:
    from arena.synth.filters import GateConfig
    from arena.synth.graph_tasks import synthesize_graph_tasks
    from arena.synth.targeted import guideline_bias

    if env.sandboxed and sandbox is not None:
        await env.describe(sandbox)  # a synthesized env's tool schemas and write tools (idempotent)
    helper = await ctx.models.helper() if request.writer == "model" else None
    kwargs: dict[str, Any] = {
        "seed": request.seed,
        "helper": helper,
        "writer": request.writer,
        "sandbox": sandbox if env.sandboxed else None,
        "gates": GateConfig(),
        "round_id": ctx.round,
        "max_attempts": request.max_attempts or max(8, request.n * ctx.config.synthesis.max_attempts),
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


async def accept_outcome(
    ctx: PhaseContext, request: SynthesisRequest, outcome: SynthesisOutcome, reports: list[dict[str, Any]]
) -> list[Any]:
    """The daemon's side of a finished request: metrics, yardstick exclusion, the report line."""
    if request.kind != "graph":
        if outcome.summary is not None:
            reports.append(outcome.summary)
        return list(outcome.tasks)
    origin = "targeted" if request.guideline is not None else "graph"
    reports.append(record_synthesis(ctx, outcome.report, request.label or origin))
    tasks = list(outcome.tasks)
    if request.label != "yardstick":
        # The yardstick is never trained on, and a walk from another seed can land on one of its tasks.
        from ops.phases.yardstick import fingerprint, fingerprints

        held = await fingerprints(ctx, request.env)
        tasks = [t for t in tasks if fingerprint(t) not in held]
        if len(tasks) < len(outcome.tasks):
            log.info("synth.yardstick_excluded", env=request.env, dropped=len(outcome.tasks) - len(tasks))
    log.info(
        "synth.done",
        env=request.env,
        origin=origin,
        requested=request.n,
        kept=len(tasks),
        rejections=outcome.report.rejections,
        seconds=round(outcome.report.seconds, 2),
    )
    return tasks


def request_runner(ctx: PhaseContext, envs: dict[str, Any], sandbox: Any) -> tuple[RequestRunner, int]:
    """Where requests run and how many at once: the cluster's workers, else here one at a time."""
    if ctx.cluster is not None:
        from ops.phases.jobs import EpisodeJob

        # A worker opens its sandbox pool per request, for a sandboxed environment's request only.
        job = EpisodeJob(
            round=ctx.round, phase=ctx.phase, tconf=None, sandbox_available=ctx.sandbox_available
        )
        return ctx.cluster.synthesizer(job), max(1, int(ctx.cluster.capacity))

    async def here(request: SynthesisRequest) -> SynthesisOutcome:
        return await run_request(ctx, envs, request, sandbox)

    return here, 1


async def synthesize_for_envs(
    ctx: PhaseContext, envs: dict[str, Any], requests: dict[str, list[SynthesisRequest]], sandbox: Any
) -> tuple[dict[str, list[Any]], list[dict[str, Any]]]:
    """Run every environment's requests where `request_runner` says (`sandbox`: this process's
    pool, for local mode), as many at once as it allows; each environment's tasks are
    accepted in request order and stored with the round as soon as its last request is in, so a
    restarted phase keeps what was saved (`ops.phases.tasks.stored_tasks`).

    Returns the tasks by environment and the report lines, both in `requests`' order. A stop
    requested at a safe point lets the requests under way finish, then raises `StopRequested`.
    """
    run, concurrency = request_runner(ctx, envs, sandbox)
    limiter = anyio.CapacityLimiter(max(1, concurrency))
    tasks: dict[str, list[Any]] = {}
    reports: dict[str, list[dict[str, Any]]] = {}
    stopped = False
    done = 0

    async def one_env(name: str, batch: list[SynthesisRequest]) -> None:
        nonlocal stopped, done
        outcomes: list[SynthesisOutcome | None] = [None] * len(batch)

        async def one(i: int, request: SynthesisRequest) -> None:
            nonlocal stopped
            async with limiter:
                if not await ctx.may_go_on():
                    stopped = True
                    return
                ctx.progress(done, len(requests), f"synthesizing for {name}")
                outcomes[i] = await run(request)

        async with anyio.create_task_group() as tg:
            for i, request in enumerate(batch):
                tg.start_soon(one, i, request)
        if any(o is None for o in outcomes):
            return  # stopped before all of it ran: nothing of this environment is saved
        env_reports: list[dict[str, Any]] = []
        fresh: list[Any] = []
        for request, outcome in zip(batch, outcomes, strict=True):
            assert outcome is not None
            fresh += await accept_outcome(ctx, request, outcome, env_reports)
        await save_tasks(ctx, fresh)
        tasks[name], reports[name] = fresh, env_reports
        done += 1

    async with anyio.create_task_group() as tg:
        for name, batch in requests.items():
            tg.start_soon(one_env, name, batch)
    if stopped:
        raise StopRequested
    ctx.progress(len(requests), len(requests))
    return (
        {name: tasks[name] for name in requests},
        [line for name in requests for line in reports[name]],
    )
