"""Running a phase's episodes as idempotent work items.

An episode is keyed by (round, task id, sample index). Before running, the keys already in the
store are skipped, so a restarted phase never redoes committed episodes; each episode is stored in
the next small transaction once it finishes (results that finish together share one), so a
crash loses at most the episodes in flight.
Between episodes the phase passes a safe point (pause/stop). The items, results and runners are
the work layer's (`work.jobs`): the same on a cluster worker.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import anyio
from sqlmodel.ext.asyncio.session import AsyncSession

from arena.store import TaskRow, repo
from arena.store.tables import JsonText, utcnow
from ops.phases.base import PhaseContext, StopRequested
from work.jobs import BatchRunner, EpisodeResult, Runner, WorkItem


def _stored(value: dict[str, Any] | str) -> Any:
    # Text is a worker's encoding of the document: the store writes it as it is, not as a JSON string.
    return JsonText(value) if isinstance(value, str) else value


def _one_at_a_time(runner: Runner) -> BatchRunner:
    async def run(chunk: list[WorkItem]) -> list[EpisodeResult]:
        return [await runner(item) for item in chunk]

    return BatchRunner(run=run, size=1)


async def store_tasks(ctx: PhaseContext, tasks: Sequence[TaskRow]) -> None:
    """Store the tasks a phase will run (idempotent), before any episode references them."""
    async with ctx.store.transaction() as s:
        for task in tasks:
            await repo.upsert_task(s, task)


# Stores one committed batch of finished items in the open transaction.
Saver = Callable[[AsyncSession, list[tuple[WorkItem, EpisodeResult]]], Awaitable[None]]


async def run_items(
    ctx: PhaseContext,
    items: Sequence[WorkItem],
    runner: Runner | BatchRunner,
    *,
    done: set[tuple[str, int]],
    save: Saver,
    concurrency: int = 1,
) -> int:
    """Run the items whose (task id, sample index) is not in `done`, `concurrency` at a time.

    Results are saved by `save` as soon as they are in, by one committer: the results that finish
    while a commit is under way go in the next transaction together (group commit), which `save`
    gets as one batch. A busy daemon (many cluster workers) then pays one transaction per batch
    instead of one per episode, and a crash still loses at most the episodes in flight or waiting
    for that next commit. A `BatchRunner` gets the items in chunks of its size (`concurrency` still
    counts items). Returns how many ran.
    """
    todo = [it for it in items if (it.task_id, it.sample_idx) not in done]
    total, finished = len(items), len(items) - len(todo)
    ctx.progress(finished, total, f"{len(todo)} episodes to run")
    batched = runner if isinstance(runner, BatchRunner) else _one_at_a_time(runner)
    size = batched.size
    chunks = [todo[i : i + size] for i in range(0, len(todo), size)]
    limiter = anyio.CapacityLimiter(max(1, concurrency // size))
    stopped = False
    send, receive = anyio.create_memory_object_stream[tuple[WorkItem, EpisodeResult]](math.inf)

    async def one(chunk: list[WorkItem]) -> None:
        nonlocal stopped
        async with limiter:
            if not await ctx.may_go_on():
                stopped = True
                return
            results = await batched.run(chunk)
        for item, result in zip(chunk, results, strict=True):
            await send.send((item, result))

    async def commit() -> None:
        nonlocal finished
        async with receive:
            async for first in receive:
                batch = [first]
                while True:
                    try:
                        batch.append(receive.receive_nowait())
                    except (anyio.WouldBlock, anyio.EndOfStream):
                        break
                async with ctx.store.transaction() as s:
                    await save(s, batch)
                for item, result in batch:
                    ctx.metrics.record_episode(item.env, result.finish, result.reward)
                finished += len(batch)
                ctx.progress(finished, total)

    async with anyio.create_task_group() as committer:
        committer.start_soon(commit)
        async with send, anyio.create_task_group() as tg:
            for chunk in chunks:
                tg.start_soon(one, chunk)
    if stopped:
        raise StopRequested
    return len(todo)


def episode_values(round_no: int, item: WorkItem, result: EpisodeResult, purpose: str) -> dict[str, Any]:
    """The stored columns of one finished work item (`repo.upsert_episode_values`)."""
    return {
        "round": round_no,
        "task_id": item.task_id,
        "sample_idx": item.sample_idx,
        "env": item.env,
        "purpose": purpose,
        "reward": result.reward,
        "passed": result.passed,
        "finish": result.finish,
        "transcript": _stored(result.transcript),
        "verdict": _stored(result.verdict),
        "worker": result.worker,
        "created_at": utcnow(),
    }


async def run_work_items(
    ctx: PhaseContext,
    items: Sequence[WorkItem],
    runner: Runner | BatchRunner,
    *,
    purpose: str,
    concurrency: int = 1,
) -> dict[str, Any]:
    """Run the items not yet stored as episodes; returns counts and reward statistics."""
    async with ctx.store.transaction() as s:
        existing = await repo.episode_keys(s, ctx.round, purpose=None)

    async def save(s: AsyncSession, batch: list[tuple[WorkItem, EpisodeResult]]) -> None:
        await repo.upsert_episode_values(
            s, [episode_values(ctx.round, item, result, purpose) for item, result in batch]
        )

    ran = await run_items(ctx, items, runner, done=existing, save=save, concurrency=concurrency)
    async with ctx.store.transaction() as s:
        episodes = await repo.episodes_for_round(s, ctx.round, purpose=purpose)
    rewards = [e.reward for e in episodes]
    stats = {
        "episodes": len(episodes),
        "ran": ran,
        "skipped_existing": len(items) - ran,
        "reward_mean": statistics.fmean(rewards) if rewards else None,
        "reward_stddev": statistics.pstdev(rewards) if len(rewards) > 1 else 0.0,
        "passed": sum(e.passed for e in episodes),
    }
    if rewards:
        ctx.metrics.reward_mean.labels(phase=ctx.phase).set(stats["reward_mean"])
        ctx.metrics.reward_std.labels(phase=ctx.phase).set(stats["reward_stddev"])
    return stats
