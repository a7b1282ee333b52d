"""Running a phase's synthesis requests: where they run, and the daemon's side of each outcome.

`ops.phases.synth_requests` is the work itself (it runs on a cluster worker as well as here); this
module is what only the daemon does around it: send the requests to the cluster's workers or run
them here (`request_runner`, `synthesize_for_envs`), then take each outcome in (`accept_outcome`:
the gate metrics, the exclusion of tasks that repeat a yardstick task, the round's report) and
store the tasks with the round (`ops.phases.tasks`). `graph_tasks` is one request run here.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import anyio
import structlog

from ops.phases.base import PhaseContext, StopRequested
from ops.phases.held_out import fingerprint, fingerprints
from ops.phases.runtime import record_synthesis
from ops.phases.synth_requests import SynthesisOutcome, SynthesisRequest, graph_request, run_request
from ops.phases.synth_site import SynthesisSite
from ops.phases.tasks import save_tasks

log = structlog.get_logger(__name__)

RequestRunner = Callable[[SynthesisRequest], Awaitable[SynthesisOutcome]]


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
        from work.jobs import EpisodeJob

        # A worker opens its sandbox pool per request, for a sandboxed environment's request only.
        job = EpisodeJob(round=ctx.round, phase=ctx.phase, sandbox_available=ctx.sandbox_available)
        return ctx.cluster.synthesizer(job), max(1, int(ctx.cluster.capacity))

    async def here(request: SynthesisRequest) -> SynthesisOutcome:
        return await run_request(SynthesisSite.of(ctx), envs, request, sandbox)

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


async def graph_tasks(
    ctx: PhaseContext,
    env: Any,
    n: int,
    *,
    seed: int,
    difficulty: Any,
    sandbox: Any,
    guideline: Any = None,
    distractor_pool: Sequence[str] = (),
    reports: list[dict[str, Any]],
    label: str | None = None,
) -> list[Any]:
    """`n` gated graph tasks synthesized here by the template writer (targeted with a `guideline`).

    `label` names the tasks' use in the metrics (`yardstick` when drawing it; default the origin);
    the report goes to metrics and `reports`. Any other task that repeats a yardstick task of the
    environment is dropped (`accept_outcome`).
    """
    request = graph_request(
        ctx,
        env.name,
        n,
        seed=seed,
        difficulty=difficulty,
        guideline=guideline,
        distractor_pool=distractor_pool,
        label=label,
        with_helper=False,
    )
    outcome = await run_request(SynthesisSite.of(ctx), {env.name: env}, request, sandbox)
    return await accept_outcome(ctx, request, outcome, reports)
