"""Fresh tasks for a round: synthesized once, stored with the round, reused when a phase restarts.

Graph synthesis is deterministic in (environment, seed, index) but not free; a phase that restarts
after a crash reads the tasks it already stored for the round instead of synthesizing again, so
the episodes it already committed (keyed by task id) still match. Synthesizing them is
`ops.phases.synth_dispatch`'s (which stores through `save_tasks`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from arena.store import TaskRow, repo
from ops.phases.base import PhaseContext


def task_row(task: Any, round_no: int) -> TaskRow:
    """The store row of a task; its id is `ENV/ID` (task ids are unique per environment only)."""
    return TaskRow(
        id=task.full_id, env=task.env, origin=task.origin, round=round_no, data=task.model_dump(mode="json")
    )


async def stored_tasks(
    ctx: PhaseContext, envs: Sequence[str], origins: Sequence[str]
) -> dict[str, list[Any]]:
    """This round's stored tasks of `envs` with one of `origins`, by environment."""
    from arena.tasks.model import Task

    async with ctx.store.transaction() as s:
        rows = await repo.tasks_for_round(s, ctx.round)
    out: dict[str, list[Any]] = {}
    for row in rows:
        if row.env in envs and row.origin in origins:
            out.setdefault(row.env, []).append(Task.model_validate(row.data))
    for tasks in out.values():
        tasks.sort(key=lambda t: t.id)
    return out


async def save_tasks(ctx: PhaseContext, tasks: Sequence[Any]) -> None:
    """Store tasks with this round (idempotent)."""
    async with ctx.store.transaction() as s:
        for task in tasks:
            await repo.upsert_task(s, task_row(task, ctx.round))


def pick(
    names: Sequence[str], limit: int | None, seed: int, key: Callable[[str], Any] = lambda _: 0
) -> list[str]:
    """Up to `limit` of `names`, grouped by `key` first and shuffled by `seed` within a group."""
    import random

    rng = random.Random(seed)
    shuffled = sorted(names)
    rng.shuffle(shuffled)
    ordered = sorted(shuffled, key=key)  # stable: keeps the shuffle within each key
    return ordered if limit is None else ordered[:limit]
