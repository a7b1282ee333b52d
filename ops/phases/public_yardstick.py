"""The public yardstick: a fixed sample of BFCL multi-turn entries, run every round beside Arena's own.

Arena's yardstick is graded by Arena; this one is not: the entries, the backends and the rules are
BFCL's (`arena.public.bfcl`), so a round's figure can be set beside published ones. It is

- fixed: `public.bfcl_per_category` entries of each of `public.bfcl_categories`, drawn with
  `daemon.seed` by a hash per entry (`arena.public.bfcl.run.sample`), so every round runs the
  same entries for as long as the configuration and the import stay;
- held out: the import lives in `DATA_DIR/public`, which the environment registry never reads,
  so no phase can draw, synthesize from or train on it;
- measured per round and stage like the yardstick (`live` in EVALUATE, `candidate` in PUBLISH
  with `public.publish_gate`), greedy, every tool, one row per entry in `public_runs`; a policy
  already measured on the same entries and version is not run again (its runs are copied);
- run in the daemon's process, in the sandbox with `ARENA_SANDBOX=all` (the backend is code the
  user supplied, like an environment folder's tools).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import structlog

from arena.store import PublicRunRow, public_runs
from arena.store.tables import utcnow
from ops.phases.base import PhaseContext
from ops.phases.episodes import run_items
from ops.phases.public_scores import PublicYardstick, public_gate, summarize
from ops.phases.runtime import sandbox_pool
from ops.phases.yardstick_scores import GateDecision
from work.jobs import EpisodeResult, WorkItem

log = structlog.get_logger(__name__)
BENCHMARK = "bfcl"


def _benchmark(ctx: PhaseContext) -> Any:
    """The imported benchmark, or a `PublicYardstick` saying why there is none to run."""
    from arena.public.bfcl.model import SUBDIR, load_benchmark

    cfg = ctx.config.public
    if cfg.bfcl_per_category == 0:
        return PublicYardstick(state="off", note="public.bfcl_per_category = 0")
    if ctx.config.sandbox.mode == "all" and ctx.sandbox_available is False:
        return PublicYardstick(state="unavailable", note="ARENA_SANDBOX=all, and no sandbox boundary here")
    try:
        return load_benchmark(ctx.config.data.dir / SUBDIR)
    except FileNotFoundError as exc:
        return PublicYardstick(state="not_imported", note=str(exc))
    except ValueError as exc:
        log.warning("public.import_broken", error=str(exc)[:300])
        return PublicYardstick(state="unavailable", note=str(exc))


async def measure(ctx: PhaseContext, *, stage: str, policy: str, pool: Any = None) -> PublicYardstick:
    """Run (or reuse) the public yardstick for `policy`; its summary, or why it did not run."""
    from arena.public.bfcl.run import sample

    bench = _benchmark(ctx)
    if isinstance(bench, PublicYardstick):
        return bench.model_copy(update={"stage": stage, "policy": policy})
    cfg = ctx.config.public
    entries = sample(bench, cfg.bfcl_categories, cfg.bfcl_per_category, ctx.config.daemon.seed)
    wanted = {e.id for e in entries}
    reused = await reuse_runs(ctx, stage, policy, BENCHMARK, bench.version, wanted)
    async with ctx.store.transaction() as s:
        done = {(r.entry_id, 0) for r in await public_runs.runs(s, ctx.round, stage, BENCHMARK)}
    sandboxed = ctx.config.sandbox.mode == "all"
    if any((e.id, 0) not in done for e in entries):
        # The backend runs sandboxed only with ARENA_SANDBOX=all (a pool EVALUATE opened for
        # synthesized environments is not a reason to), in the phase's pool when it has one.
        async with sandbox_pool(ctx, needed=sandboxed and pool is None) as own:
            boxed = (pool or own) if sandboxed else None
            await _run(ctx, bench, entries, done, stage=stage, policy=policy, pool=boxed)
    async with ctx.store.transaction() as s:
        rows = [r for r in await public_runs.runs(s, ctx.round, stage, BENCHMARK) if r.entry_id in wanted]
    return summarize(
        rows,
        benchmark=BENCHMARK,
        version=bench.version,
        stage=stage,
        policy=policy,
        sandboxed=sandboxed,
        reused_from=reused,
    )


async def _run(
    ctx: PhaseContext,
    bench: Any,
    entries: list[Any],
    done: set[tuple[str, int]],
    *,
    stage: str,
    policy: str,
    pool: Any,
) -> None:
    from arena.env.object_runtime import ObjectRunner
    from arena.public.bfcl.episode import EpisodeLimits
    from arena.public.bfcl.run import play

    model = await ctx.models.policy()
    runner = ObjectRunner(bench.backend(), str(bench.backend_dir), pool)
    limits = EpisodeLimits(
        max_steps_per_turn=ctx.config.public.bfcl_max_steps,
        max_tokens_per_step=ctx.config.round.max_tokens_per_turn,
        temperature=0.0,
    )
    by_id = {e.id: e for e in entries}

    async def one(item: WorkItem) -> EpisodeResult:
        result = await play(model, bench, by_id[item.task_id], runner, limits)
        v, run = result.verdict, result.run
        return EpisodeResult(
            reward=float(v.passed),
            passed=v.passed,
            finish=run.finish if run else "completed",
            verdict=v.model_dump(mode="json") | {"seconds": run.seconds if run else 0.0},
        )

    save = run_saver(
        ctx,
        stage=stage,
        benchmark=BENCHMARK,
        version=bench.version,
        policy=policy,
        category=lambda item: by_id[item.task_id].category,
    )

    items = [WorkItem(task_id=e.id, env=e.env, sample_idx=0) for e in entries]
    ctx.progress(len(done), len(items), f"public yardstick: {len(items) - len(done)} BFCL entries to run")
    await run_items(ctx, items, one, done=done, save=save, concurrency=ctx.config.round.episode_concurrency)


def run_saver(
    ctx: PhaseContext,
    *,
    stage: str,
    benchmark: str,
    version: str,
    policy: str,
    category: Callable[[WorkItem], str],
) -> Callable[[Any, list[tuple[WorkItem, EpisodeResult]]], Awaitable[None]]:
    """What `run_items` calls to store a batch of a public benchmark's runs (one row per entry)."""

    async def save(s: Any, batch: list[tuple[WorkItem, EpisodeResult]]) -> None:
        for item, result in batch:
            verdict = result.verdict if isinstance(result.verdict, dict) else {}
            await public_runs.add_run(
                s,
                PublicRunRow(
                    round=ctx.round,
                    stage=stage,
                    benchmark=benchmark,
                    entry_id=item.task_id,
                    category=category(item),
                    version=version,
                    policy=policy,
                    passed=result.passed,
                    error_type=verdict.get("error_type"),
                    finish=result.finish,
                    seconds=float(verdict.get("seconds") or 0.0),
                ),
            )

    return save


async def reuse_runs(
    ctx: PhaseContext, stage: str, policy: str, benchmark: str, version: str, wanted: set[str]
) -> dict[str, Any] | None:
    """Copy the newest earlier runs of the same policy on the same entries to this round and stage."""
    async with ctx.store.transaction() as s:
        if await public_runs.runs(s, ctx.round, stage, benchmark):
            return None  # this round already has runs of its own (a restarted phase)
        earlier = await public_runs.latest_runs_of(s, policy, benchmark, version, before_round=ctx.round)
        if not earlier or {r.entry_id for r in earlier} != wanted:
            return None
        for r in earlier:
            copied = {**r.model_dump(), "round": ctx.round, "stage": stage, "created_at": utcnow()}
            await public_runs.add_run(s, PublicRunRow.model_validate(copied))
    source = {"round": earlier[0].round, "stage": earlier[0].stage}
    log.info("public.reused", benchmark=benchmark, policy=policy, **source)
    return source


async def gate_candidate(ctx: PhaseContext, candidate: str) -> tuple[GateDecision, PublicYardstick | None]:
    """The trained policy (already loaded) on the public sample, against this round's parent runs."""
    if not ctx.config.public.publish_gate:
        return public_gate([], [], enabled=False), None
    async with ctx.store.transaction() as s:
        parent = await public_runs.runs(s, ctx.round, "live", BENCHMARK)
    if not parent:
        return GateDecision(publish=True, reason="public yardstick: no runs of the parent to compare"), None
    measured = await measure(ctx, stage="candidate", policy=candidate)
    async with ctx.store.transaction() as s:
        runs = await public_runs.runs(s, ctx.round, "candidate", BENCHMARK)
    decision = public_gate(parent, runs, enabled=True)
    log.info("publish.public_gate", publish=decision.publish, reason=decision.reason)
    return decision, measured
