"""τ²-bench in the public yardstick: a fixed sample of retail and airline tasks every round.

Beside BFCL (`ops.phases.public_yardstick`), and on the same terms: the tasks, the database, the
policy and the reward rules are τ²'s (`arena.public.tau2`), imported from a checkout the user
supplies into `DATA_DIR/public/tau2/<domain>/`, which the environment registry never reads, so no
phase can draw, synthesize from or train on them. Every round runs the same
`public.tau2_per_domain` tasks of each imported domain (drawn with `daemon.seed` by a hash per
task), greedy, with the helper model playing τ²'s user from the task's scenario and judging its
natural-language assertions; one `public_runs` row per task (benchmark `tau2`, category the
domain, passed when τ²'s reward is 1.0). A policy already measured on the same tasks and import is
copied, not run again.
"""

from __future__ import annotations

from typing import Any

import structlog

from arena.store import public_runs
from ops.phases.base import PhaseContext
from ops.phases.episodes import run_items
from ops.phases.public_scores import PublicYardstick, summarize
from ops.phases.public_yardstick import reuse_runs, run_saver
from ops.phases.simulated_training_gate import helper_fidelity, judge_note
from work.jobs import EpisodeResult, WorkItem

log = structlog.get_logger(__name__)
BENCHMARK = "tau2"


def _domains(ctx: PhaseContext) -> list[Any] | PublicYardstick:
    """The imported domains the configuration asks for, or a `PublicYardstick` saying why none runs."""
    from arena.public.tau2.model import load_domain

    cfg = ctx.config.public
    if cfg.tau2_per_domain == 0:
        return PublicYardstick(benchmark=BENCHMARK, state="off", note="public.tau2_per_domain = 0")
    domains, missing = [], []
    for name in cfg.tau2_domains:
        try:
            domains.append(load_domain(ctx.config.data.dir, name))
        except FileNotFoundError:
            missing.append(name)
        except ValueError as exc:
            log.warning("public.tau2_import_broken", domain=name, error=str(exc)[:300])
            return PublicYardstick(benchmark=BENCHMARK, state="unavailable", note=f"{name}: {exc}"[:300])
    if not domains:
        note = f"no τ² domain imported ({', '.join(missing)}): arena envs import-tau2"
        return PublicYardstick(benchmark=BENCHMARK, state="not_imported", note=note)
    return domains


def _version(domains: list[Any]) -> str:
    """One label for the imports measured: each domain's checkout commit (short)."""
    return ",".join(f"{d.name}@{(d.manifest.commit or 'unknown')[:12]}" for d in domains)[:60]


async def measure(ctx: PhaseContext, *, stage: str, policy: str) -> PublicYardstick:
    """Run (or reuse) the τ² sample for `policy`; its summary, or why it did not run."""
    from arena.public.tau2.run import sample

    domains = _domains(ctx)
    if isinstance(domains, PublicYardstick):
        return domains.model_copy(update={"stage": stage, "policy": policy})
    cfg = ctx.config.public
    chosen = [(d, t) for d in domains for t in sample(d.tasks, cfg.tau2_per_domain, ctx.config.daemon.seed)]
    wanted = {f"{d.name}/{t.id}" for d, t in chosen}
    version = _version(domains)
    reused = await reuse_runs(ctx, stage, policy, BENCHMARK, version, wanted)
    async with ctx.store.transaction() as s:
        done = {(r.entry_id, 0) for r in await public_runs.runs(s, ctx.round, stage, BENCHMARK)}
    if any((key, 0) not in done for key in wanted):
        await _run(ctx, chosen, done, stage=stage, policy=policy, version=version)
    async with ctx.store.transaction() as s:
        rows = [r for r in await public_runs.runs(s, ctx.round, stage, BENCHMARK) if r.entry_id in wanted]
    # τ²'s NL assertions are the helper judge's verdicts: its measured agreement rides along.
    judge = judge_note(*await helper_fidelity(ctx))
    return summarize(
        rows,
        benchmark=BENCHMARK,
        version=version,
        stage=stage,
        policy=policy,
        reused_from=reused,
        judge=judge,
    )


async def _run(
    ctx: PhaseContext,
    chosen: list[tuple[Any, Any]],
    done: set[tuple[str, int]],
    *,
    stage: str,
    policy: str,
    version: str,
) -> None:
    from arena.public.tau2.episode import Tau2Limits
    from arena.public.tau2.run import play
    from simulate.simulators.judge import TrajectoryJudge
    from simulate.simulators.user import SimulatedUser

    model, helper = await ctx.models.policy(), await ctx.models.helper()
    user, judge = SimulatedUser(helper), TrajectoryJudge(helper)
    limits = Tau2Limits(
        max_steps=ctx.config.public.tau2_max_steps,
        max_tokens_per_step=ctx.config.round.max_tokens_per_turn,
        temperature=0.0,
    )
    by_key = {f"{d.name}/{t.id}": (d, t) for d, t in chosen}

    async def one(item: WorkItem) -> EpisodeResult:
        domain, task = by_key[item.task_id]
        run = await play(domain, task, model, user, limits, judge)
        passed = run.score.reward >= 1.0
        return EpisodeResult(
            reward=run.score.reward,
            passed=passed,
            finish=run.termination,
            verdict={"error_type": None if passed else _failure(run), "seconds": run.seconds},
        )

    save = run_saver(
        ctx, stage=stage, benchmark=BENCHMARK, version=version, policy=policy, category=lambda item: item.env
    )

    items = [WorkItem(task_id=key, env=d.name, sample_idx=0) for key, (d, _) in by_key.items()]
    ctx.progress(len(done), len(items), f"public yardstick: {len(items) - len(done)} τ² tasks to run")
    await run_items(ctx, items, one, done=done, save=save, concurrency=ctx.config.round.episode_concurrency)


def _failure(run: Any) -> str:
    """Why a τ² task failed, as one short label: the termination, else the first failed part."""
    if run.termination not in ("agent_stop", "user_stop"):
        return str(run.termination)
    score = run.score
    for part in ("db", "actions", "communicate", "nl"):
        value = getattr(score, part, None)
        if value is False or (isinstance(value, list) and not all(value)):
            return part
    return "reward"
