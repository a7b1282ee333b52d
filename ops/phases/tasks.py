"""Fresh tasks for a round: synthesized once, stored with the round, reused when a phase restarts.

Graph synthesis is deterministic in (environment, seed, index) but not free; a phase that restarts
after a crash reads the tasks it already stored for the round instead of synthesizing again, so
the episodes it already committed (keyed by task id) still match.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import structlog

from arena.store import TaskRow, repo
from ops.phases.base import PhaseContext
from ops.phases.runtime import record_synthesis

log = structlog.get_logger(__name__)


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


async def graph_tasks(
    ctx: PhaseContext,
    env: Any,
    n: int,
    *,
    seed: int,
    difficulty: Any,
    sandbox: Any,
    helper: Any = None,
    guideline: Any = None,
    distractor_pool: Sequence[str] = (),
    reports: list[dict[str, Any]],
    label: str | None = None,
) -> list[Any]:
    """`n` gated graph tasks (targeted when a `guideline` is given); the report goes to metrics and `reports`.

    `label` names the tasks' use in the metrics (`yardstick` when drawing it; default the origin).
    Any other task that repeats a yardstick task of the environment is dropped: the yardstick is
    never trained on, and a graph walk from another seed can land on the same exercise.
    """
    from arena.synth.filters import GateConfig
    from arena.synth.graph_tasks import synthesize_graph_tasks
    from arena.synth.targeted import guideline_bias

    if env.sandboxed and sandbox is not None:
        await env.describe(sandbox)  # a synthesized env's tool schemas and write tools (idempotent)
    writer = ctx.config.synthesis.writer if helper is not None else "template"
    attempts = max(8, n * ctx.config.synthesis.max_attempts)
    kwargs: dict[str, Any] = {
        "seed": seed,
        "helper": helper if writer == "model" else None,
        "writer": writer,
        "sandbox": sandbox if env.sandboxed else None,
        "gates": GateConfig(),
        "round_id": ctx.round,
        "max_attempts": attempts,
        "distractor_pool": distractor_pool,
    }
    origin = "graph"
    if guideline is not None:
        origin = "targeted"
        kwargs |= {
            "difficulty": guideline.difficulty,
            "bias": guideline_bias(env, guideline),
            "guidance": " ".join(
                p for p in (guideline.failure_pattern.strip(), guideline.skill.strip()) if p
            ),
            "origin": "targeted",
        }
    else:
        kwargs["difficulty"] = difficulty
    result = await synthesize_graph_tasks(env, n, **kwargs)
    reports.append(record_synthesis(ctx, result.report, label or origin))
    tasks = list(result.tasks)
    if label != "yardstick":
        from ops.phases.yardstick import fingerprint, fingerprints

        held = await fingerprints(ctx, env.name)
        tasks = [t for t in tasks if fingerprint(t) not in held]
        if len(tasks) < len(result.tasks):
            log.info("synth.yardstick_excluded", env=env.name, dropped=len(result.tasks) - len(tasks))
    log.info(
        "synth.done",
        env=env.name,
        origin=origin,
        requested=n,
        kept=len(tasks),
        rejections=result.report.rejections,
        seconds=round(result.report.seconds, 2),
    )
    return tasks


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
