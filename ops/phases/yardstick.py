"""The yardstick: a fixed set of tasks per arena environment, run every round with every tool, greedy.

EVALUATE's fresh tasks follow the curriculum, so their pass rate is held in the curriculum's band
by design; the yardstick says whether the policy got better. It is

- drawn once: on the first round, for up to `round.eval_max_envs` arena environments picked with
  the daemon's seed (not the round's), `round.yardstick_tasks_per_level` tasks per level of
  `yardstick_scores.LEVELS`, with a seed that does not depend on the round; stored in
  `yardstick_tasks` and never redrawn (a later environment version is reported, not redrawn);
- never trained on: its tasks live in their own table, which SYNTHESIZE and TRAIN never read, and
  synthesis drops any training task that repeats one (`ops.phases.held_out.fingerprint`);
- run under caps its tasks fit: each task gets its reference's calls plus two turns and room for
  its longest call (`turn_budget`, `token_budget`), at least the round's caps, so a hard task
  measures the policy rather than `round.max_turns` (`round.yardstick_caps = "round"`: the
  round's caps for every task);
- measured per round and stage (`live`: EVALUATE's policy; `candidate`: the policy PUBLISH gates)
  into `yardstick_runs`. A policy already measured on the same tasks (the candidate published last
  round, or a parent that was kept) is not run again: greedy decoding gives it the same episodes,
  so its runs are copied to this round and the output says where they came from.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import anyio
import structlog

from arena.store import YardstickRunRow, YardstickTaskRow, repo, repo_yardstick
from arena.store.tables import utcnow
from ops.phases.base import PhaseContext
from ops.phases.episodes import run_items
from ops.phases.eval_runner import episode_concurrency, episode_runner, simulated_tasks
from ops.phases.runtime import trainer_config
from ops.phases.synth_dispatch import graph_tasks
from ops.phases.tasks import pick
from ops.phases.yardstick_scores import LEVELS, summarize
from trainer.rollout import episode_view
from work.jobs import BatchRunner, EpisodeResult, Runner, WorkItem

log = structlog.get_logger(__name__)
VERSION = 1  # of the drawing procedure, stored with every task


async def live_policy(ctx: PhaseContext) -> str:
    """The id of the published checkpoint EVALUATE measures (`base` before the first publish)."""
    async with ctx.store.transaction() as s:
        latest = await repo.latest_checkpoint(s, published=True)
    return latest.id if latest is not None else "base"


def _seed(ctx: PhaseContext, level_index: int) -> int:
    # Fixed for the life of the store: never the round's seed, so a restart draws the same tasks.
    return (ctx.config.daemon.seed + 1) * 7_919 + 104_729 * (level_index + 1)


async def ensure_drawn(
    ctx: PhaseContext, envs: dict[str, Any], candidates: Sequence[str], pool: Any
) -> tuple[list[Any], dict[str, str]]:
    """The yardstick's tasks (drawn now if none are stored) and each task's level, by full id."""
    from arena.tasks.model import Task

    n = ctx.config.round.yardstick_tasks_per_level
    async with ctx.store.transaction() as s:
        rows = await repo_yardstick.tasks(s)
    if not rows and n > 0 and candidates:
        chosen = pick(
            list(candidates),
            ctx.config.round.eval_max_envs,
            ctx.config.daemon.seed,
            key=lambda name: envs[name].kind != "executable",
        )
        rows = await _draw(ctx, envs, chosen, n, pool)
    order = list(LEVELS)
    known = sorted((r for r in rows if r.env in envs), key=lambda r: (r.env, order.index(r.level), r.id))
    drifted = sorted({r.env for r in known if r.env_version and r.env_version != envs[r.env].version})
    if drifted:
        log.warning("yardstick.env_changed", envs=drifted, note="tasks drawn on an older version are kept")
    tasks = [Task.model_validate(r.data) for r in known]
    return tasks, {f"{r.env}/{Task.model_validate(r.data).id}": r.level for r in known}


async def _draw(
    ctx: PhaseContext, envs: dict[str, Any], chosen: Sequence[str], n: int, pool: Any
) -> list[YardstickTaskRow]:
    rows: list[YardstickTaskRow] = []
    reports: list[dict[str, Any]] = []
    for name in chosen:
        env = envs[name]
        for index, (level, difficulty) in enumerate(LEVELS.items()):
            await ctx.safe_point()
            ctx.progress(0, 0, f"drawing the {level} yardstick of {name}")
            seed = _seed(ctx, index)
            if env.kind == "executable":
                drawn = await graph_tasks(
                    ctx,
                    env,
                    n,
                    seed=seed,
                    difficulty=difficulty,
                    sandbox=pool,
                    reports=reports,
                    label="yardstick",
                )
            else:
                drawn = await simulated_tasks(ctx.models, ctx.round, env, n, difficulty, seed=seed)
            for task in drawn:
                task = task.model_copy(update={"id": f"ys-{level}-{task.id}"[:180], "round": None})
                rows.append(
                    YardstickTaskRow(
                        id=task.full_id,
                        env=name,
                        level=level,
                        version=VERSION,
                        env_version=str(env.version),
                        data=task.model_dump(mode="json"),
                    )
                )
    async with ctx.store.transaction() as s:
        await repo_yardstick.add_tasks(s, rows)
    log.info("yardstick.drawn", envs=list(chosen), tasks=len(rows), per_level=n)
    return rows


async def measure(
    ctx: PhaseContext,
    envs: dict[str, Any],
    tasks: list[Any],
    levels: dict[str, str],
    *,
    stage: str,
    policy: str,
    pool: Any,
) -> dict[str, Any]:
    """Run (or reuse) the yardstick for `policy`; returns its summary and how it was measured."""
    reused = await _reuse(ctx, stage, policy, set(levels))
    async with ctx.store.transaction() as s:
        done = {(r.task_id, 0) for r in await repo_yardstick.runs(s, ctx.round, stage)}
    # Every tool, greedy: the yardstick never shares the training view's help (trainer.tool_subset).
    view = episode_view(trainer_config(ctx.config, ctx.round, temperature=0.0))
    view = view.model_copy(update={"tool_subset": None})
    pending = [t for t in tasks if (t.full_id, 0) not in done]
    unprepared: list[str] = []

    async def save(s: Any, batch: list[tuple[WorkItem, EpisodeResult]]) -> None:
        for item, result in batch:
            await repo_yardstick.add_run(
                s,
                YardstickRunRow(
                    round=ctx.round,
                    stage=stage,
                    task_id=item.task_id,
                    env=item.env,
                    level=levels[item.task_id],
                    policy=policy,
                    passed=result.passed,
                    reward=result.reward,
                    finish=result.finish,
                ),
            )

    # The groups run side by side through one limiter, so the policy's batches stay as full as
    # with one cap for every task and no more episodes run at once than `episode_concurrency`.
    episode, slots = view.episode, episode_concurrency(ctx)
    limiters: dict[int, anyio.CapacityLimiter] = {}  # by items per call: a cluster batch holds one token

    async def run_group(turns: int, tokens: int, group: list[Any]) -> None:
        runner, runnable, skipped = await episode_runner(
            ctx, envs, group, with_budget(view, turns, tokens), pool
        )
        unprepared.extend(skipped)
        items = [WorkItem(task_id=t.full_id, env=t.env, sample_idx=0) for t in group if t.full_id in runnable]
        size = runner.size if isinstance(runner, BatchRunner) else 1
        limiter = limiters.setdefault(size, anyio.CapacityLimiter(max(1, slots // size)))
        await run_items(ctx, items, sharing(runner, limiter), done=done, save=save, concurrency=slots)

    caps = (episode.max_turns, episode.max_tokens_per_turn)
    fit = ctx.config.round.yardstick_caps == "fit"
    groups = by_budget(pending, *caps) if fit else [(caps, pending)]
    async with anyio.create_task_group() as tg:
        for (turns, tokens), group in groups:
            tg.start_soon(run_group, turns, tokens, group)
    async with ctx.store.transaction() as s:
        runs = [r for r in await repo_yardstick.runs(s, ctx.round, stage) if r.task_id in levels]
    summary = summarize(runs, stage=stage, policy=policy).model_dump(mode="json")
    return {**summary, "reused_from": reused, "unprepared": unprepared, "tool_subset": None}


def sharing(runner: Runner | BatchRunner, limiter: anyio.CapacityLimiter) -> Runner | BatchRunner:
    """`runner` that holds a token of `limiter` per call (a cluster runner's call is a batch)."""
    if isinstance(runner, BatchRunner):
        inner = runner

        async def run_chunk(chunk: list[WorkItem]) -> list[EpisodeResult]:
            async with limiter:
                return await inner.run(chunk)

        return BatchRunner(run=run_chunk, size=inner.size)

    async def run_one(item: WorkItem) -> EpisodeResult:
        async with limiter:
            return await runner(item)

    return run_one


def turn_budget(task: Any, floor: int) -> int:
    """Turns a yardstick task gets: its reference's calls, the final answer and one to spare.

    A five-call task cannot pass in `round.max_turns = 4`: with one cap for every level the hard
    level measured the cap, not the policy. `floor` (the round's cap) still applies to short tasks.
    """
    return max(floor, len(task.reference) + 2)


# Tokens per character of a call block, an upper bound: SmolLM2's tokenizer spells digits one by
# one and reached 0.58 on the demo yardstick's 51 tasks (ids like "RX-1001"); BPE vocabularies of
# larger models stay below it. The budget adds 8 tokens and rounds up to 32 on top.
TOKENS_PER_CHAR = 0.6


def token_budget(task: Any, floor: int) -> int:
    """Tokens per turn a yardstick task gets: room for its longest reference call, at least `floor`.

    With `round.max_tokens_per_turn = 64`, 12 of the 51 tasks of the demo's yardstick could not be
    passed at all: a `create_event` call with its title, times and attendees is 70-133 tokens, and
    the cap cut it before `</tool_call>`.
    """
    from arena.episode.parser import call_block

    longest = max(
        (len(call_block(c.name, json.dumps(c.arguments, ensure_ascii=False))) for c in task.reference),
        default=0,
    )
    # Rounded up to 32 tokens, so the yardstick's tasks fall into a few groups.
    return max(floor, -(-(int(longest * TOKENS_PER_CHAR) + 8) // 32) * 32)


def by_budget(tasks: Sequence[Any], turns: int, tokens: int) -> list[tuple[tuple[int, int], list[Any]]]:
    """`tasks` grouped by (turn budget, token budget per turn), smallest first; each group runs under its own caps."""
    groups: dict[tuple[int, int], list[Any]] = {}
    for task in tasks:
        groups.setdefault((turn_budget(task, turns), token_budget(task, tokens)), []).append(task)
    return sorted(groups.items())


def with_budget(view: Any, turns: int, tokens: int) -> Any:
    """`view` (an `EpisodeView`, a `TrainerConfig`) with `turns` turns of `tokens` tokens; the
    episode's token cap grows by what was added."""
    episode = view.episode
    extra = max(0, turns * tokens - episode.max_turns * episode.max_tokens_per_turn)
    update = {
        "max_turns": turns,
        "max_tokens_per_turn": tokens,
        "max_total_tokens": episode.max_total_tokens + extra,
    }
    return view.model_copy(update={"episode": episode.model_copy(update=update)})


async def _reuse(ctx: PhaseContext, stage: str, policy: str, wanted: set[str]) -> dict[str, Any] | None:
    """Copy the newest earlier runs of the same policy on the same tasks to this round and stage."""
    async with ctx.store.transaction() as s:
        if await repo_yardstick.runs(s, ctx.round, stage):
            return None  # this round already has runs of its own (a restarted phase)
        earlier = await repo_yardstick.latest_runs_of(s, policy, before_round=ctx.round)
        if not earlier or {r.task_id for r in earlier} != wanted:
            return None
        for r in earlier:
            copied = {**r.model_dump(), "round": ctx.round, "stage": stage, "created_at": utcnow()}
            await repo_yardstick.add_run(s, YardstickRunRow.model_validate(copied))
    source = {"round": earlier[0].round, "stage": earlier[0].stage}
    log.info("yardstick.reused", policy=policy, **source)
    return source
