"""The yardstick's tasks are held out from training: what makes two tasks the same exercise, and
the fingerprints of an environment's stored yardstick tasks.

Both the yardstick (`ops.phases.yardstick`) and the synthesis that must never repeat one of its
tasks (`ops.phases.synth_dispatch.accept_outcome`) read them here; the yardstick draws its tasks
through that synthesis, so this cannot live in the yardstick's module.
"""

from __future__ import annotations

import json
from typing import Any

from arena.store import repo_yardstick
from ops.phases.base import PhaseContext


def fingerprint(task: Any) -> str:
    """What makes two tasks the same exercise: environment, instruction and reference calls."""
    calls = [[c.name, c.arguments] for c in task.reference]
    return json.dumps([task.env, " ".join(task.instruction.split()).lower(), calls], sort_keys=True)


async def fingerprints(ctx: PhaseContext, env: str) -> set[str]:
    """The fingerprints of an environment's yardstick tasks (what training must never repeat)."""
    from arena.tasks.model import Task

    async with ctx.store.transaction() as s:
        rows = await repo_yardstick.tasks(s, [env])
    return {fingerprint(Task.model_validate(r.data)) for r in rows}
