"""The warm-up set: the tasks a fresh policy imitates before its first GRPO round.

GRPO learns only from groups whose samples differ, and a fresh small model almost never solves a
task, so every group would be flat. TRAIN therefore first fine-tunes a fresh policy on reference
solutions (SFT), and what it imitates decides what it learns. The learning benchmark measured what
transfers to held-out environments (docs/learn-bench.md): about 130 tasks of the training
environments — their hand-written tasks plus graph tasks of one to three calls that name things
by their attributes ("the booking at Harborview Suites", ambiguity 1) and whose every id comes from
the instruction or an earlier result (grounded: the look-up-then-act shape, never an id from
memory) — two epochs at a learning rate of 1e-4. `warmup_tasks` builds that set for the daemon:
`trainer.warmup_tasks_per_env` graph tasks per executable training environment (a third each of one,
two and three calls) beside the environment's hand-written tasks, gated like every synthesized task,
never one that repeats a yardstick task, from seeds of their own (so no id meets SYNTHESIZE's).
The set is deterministic in the daemon's seed and made again if TRAIN restarts; the SFT
checkpoint of the round, once saved, is reused without training again.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import structlog

# The submodule itself, not through the package: `ops.phases` imports the phases (TRAIN imports
# this module), so importing it here would be a cycle.
import ops.phases.yardstick as yardstick
from ops.phases.base import PhaseContext
from ops.phases.publish import checkpoint_id, load_policy
from ops.phases.synth_dispatch import accept_outcome
from ops.phases.synth_requests import graph_request, run_request
from ops.phases.synth_site import SynthesisSite

log = structlog.get_logger(__name__)

# Far from SYNTHESIZE's seeds (the round's seed plus multiples of 7,919): task ids derive from the seed.
WARMUP_SEED = 1_000_003
# Walk lengths of the synthesized warm-up tasks: a policy trained on one length learns to stop at it.
# One call is the yardstick's easy level (one write, then the values its result showed): with
# lengths 2-3 only, the warmed-up policy passed 3 of its 21 easy tasks (docs/learn-bench.md).
LENGTHS = (1, 2, 3)
# Candidates per kept task: grounded short walks are rare in some environments (flights kept none
# of 24 at length 2), and a template-written candidate costs milliseconds.
ATTEMPTS_PER_TASK = 48


async def training_envs(ctx: PhaseContext, envs: dict[str, Any]) -> list[str]:
    """The round's training environments (the arena draw's), less every yardstick environment."""
    from arena.store import repo_yardstick
    from ops.phases.common import top_category
    from ops.phases.evaluate import arena_draw

    draw = arena_draw(ctx, {name: top_category(env) for name, env in envs.items()})
    async with ctx.store.transaction() as s:
        held = {row.env for row in await repo_yardstick.tasks(s)}
    return [name for name in draw.training if name not in held]


def handwritten(env: Any) -> list[Any]:
    """An environment's hand-written tasks a reference can teach: autonomous, with reference calls."""
    from arena.tasks.toml_io import load_tasks

    if env.kind != "executable" or env.sandboxed or env.tasks_path is None:
        return []
    tasks = load_tasks(env.path, env.name, tools=env.tools)
    return [t for t in tasks if t.mode == "autonomous" and t.reference]


async def warmup_tasks(
    ctx: PhaseContext, envs: dict[str, Any], training: Sequence[str]
) -> tuple[list[Any], list[dict[str, Any]]]:
    """The warm-up set over the executable `training` environments, and the synthesis reports."""
    from arena.difficulty import Difficulty

    per_env = ctx.config.trainer.warmup_tasks_per_env
    tasks: list[Any] = []
    reports: list[dict[str, Any]] = []
    # Synthesized environments run their tools in the sandbox; the warm-up keeps to reviewed ones.
    names = [
        n for n in sorted(training) if n in envs and envs[n].kind == "executable" and not envs[n].sandboxed
    ]
    for name in names:
        await ctx.safe_point()
        ctx.progress(0, 0, f"warm-up tasks for {name}")
        env = envs[name]
        tasks += handwritten(env)
        for offset, length in enumerate(LENGTHS):
            n = per_env // len(LENGTHS) + (1 if offset < per_env % len(LENGTHS) else 0)
            if n == 0:
                continue
            request = graph_request(
                ctx,
                name,
                n,
                seed=ctx.config.daemon.seed + WARMUP_SEED + offset,
                # One call names its rows (the yardstick's easy level); longer walks name them by
                # attributes, so their ids come from a look-up.
                difficulty=Difficulty(walk_length=length, ambiguity=0 if length == 1 else 1),
                label="warmup",
                with_helper=False,
                grounded=True,
            ).model_copy(update={"max_attempts": ATTEMPTS_PER_TASK * n})
            outcome = await run_request(SynthesisSite.of(ctx), envs, request, None)
            tasks += await accept_outcome(ctx, request, outcome, reports)
    tasks = in_turn(tasks, ctx.config.trainer.warmup_max_tasks)
    log.info("train.warmup_tasks", envs=len(names), tasks=len(tasks), per_env=per_env)
    return tasks, reports


def in_turn(tasks: list[Any], limit: int | None) -> list[Any]:
    """At most `limit` tasks, one from each environment in turn, so every environment keeps some."""
    if limit is None or len(tasks) <= limit:
        return tasks
    queues: dict[str, list[Any]] = {}
    for task in tasks:
        queues.setdefault(task.env, []).append(task)
    picked: list[Any] = []
    while len(picked) < limit:
        for queue in queues.values():
            if queue and len(picked) < limit:
                picked.append(queue.pop(0))
    return picked


async def measure_warmup(
    ctx: PhaseContext, envs: dict[str, Any], policy_dir: Any, pool: Any
) -> dict[str, Any] | None:
    """The warmed-up policy on the yardstick (stage `warmup`), when `round.yardstick_after_warmup`.

    It is loaded as the daemon's policy for the measurement; PUBLISH loads the round's candidate
    (or its parent) afterwards, and a restarted daemon starts from the published policy anyway.
    """
    if not ctx.config.round.yardstick_after_warmup:
        return None
    tasks, levels = await yardstick.ensure_drawn(ctx, envs, [], pool)
    if not tasks:
        return None
    ctx.progress(0, 0, "the warmed-up policy on the yardstick")
    await load_policy(ctx, Path(policy_dir), 0)
    policy = f"{checkpoint_id(ctx.round)}-warmup"
    return await yardstick.measure(ctx, envs, tasks, levels, stage="warmup", policy=policy, pool=pool)
