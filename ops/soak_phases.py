"""Stand-in phases for `arena bench soak`: scripted work in place of models, through the real parts.

Nothing here evaluates or trains a model; every class is named `StandIn…`. What they do goes
through what a real round goes through, at a small size: fresh tasks and episodes committed by the
real work-item runner, each episode a real sandboxed call (`ops.phases.runtime.sandbox_pool`), a
drawn yardstick and its runs, a diagnosis, curriculum state and audit events, a checkpoint saved by
the trainer's atomic save and pruned as PUBLISH prunes (`ops.soak_train`), and the metrics a round
sets. Rewards are a hash of the round, task and sample: the same on every run.
"""

from __future__ import annotations

import hashlib
from typing import Any

from pydantic import BaseModel, Field
from sqlmodel.ext.asyncio.session import AsyncSession

from arena.protocols import ChatModel, ModelError
from arena.store import (
    CurriculumStateRow,
    TaskRow,
    YardstickRunRow,
    YardstickTaskRow,
    repo,
    repo_yardstick,
)
from arena.types import Message
from ops.phases.base import PHASE_ORDER, BasePhase, PhaseContext
from ops.phases.episodes import run_work_items, store_tasks
from ops.phases.runtime import sandbox_pool
from ops.soak_model import ModelServerFaults
from ops.soak_train import DiskFaults
from work.jobs import EpisodeResult, WorkItem

# The sandboxed work of one stand-in episode: a tiny program, run in a confined worker.
PROGRAM = (
    "def main(p):\n"
    "    if p['sleep']:\n"
    "        import time\n"
    "        time.sleep(p['sleep'])\n"
    "    return sum(p['key'].encode()) % 97\n"
)


class StandInWork(BaseModel):
    """How much scripted work one stand-in round does."""

    tasks: int = Field(6, ge=1, description="Fresh tasks per round (each round's own ids).")
    samples: int = Field(2, ge=1, description="Episodes per task.")
    envs: int = Field(2, ge=1, description="Stand-in environments at the start.")
    new_env_every: int = Field(0, ge=0, description="Add an environment every N rounds (0: never).")
    transcript_bytes: int = Field(2048, ge=0, description="Bytes of scripted transcript per episode.")
    checkpoint_kb: int = Field(64, ge=1, description="Size of the stand-in checkpoint file per round.")
    yardstick_tasks: int = Field(4, ge=1, description="Yardstick tasks drawn once.")
    call_seconds: float = Field(0.0, ge=0, le=5, description="Seconds each sandboxed call sleeps.")


def _reward(*parts: object) -> float:
    return hashlib.sha256("/".join(map(str, parts)).encode()).digest()[0] / 255


def env_names(work: StandInWork, round_no: int) -> list[str]:
    """The stand-in environments of a round (one more every `new_env_every` rounds)."""
    extra = (round_no - 1) // work.new_env_every if work.new_env_every else 0
    return [f"standin-{i}" for i in range(work.envs + extra)]


class StandInEvaluate(BasePhase):
    """EVALUATE's shape: store the round's tasks, run its episodes (each a sandboxed call), the
    yardstick's runs, the per-environment metrics."""

    name = "evaluate"

    def __init__(
        self, work: StandInWork, model: ChatModel | None = None, model_faults: ModelServerFaults | None = None
    ) -> None:
        self.work = work
        self.model, self.model_faults = model, model_faults or ModelServerFaults()

    async def run(self, ctx: PhaseContext) -> dict[str, Any]:
        envs = env_names(self.work, ctx.round)
        ctx.metrics.set_known(envs)
        rows = [
            TaskRow(
                id=f"{envs[i % len(envs)]}/r{ctx.round}-t{i}",
                env=envs[i % len(envs)],
                origin="graph",
                round=ctx.round,
                data={"i": i},
            )
            for i in range(self.work.tasks)
        ]
        await store_tasks(ctx, rows)
        items = [
            WorkItem(task_id=r.id, env=r.env, sample_idx=s, task=r.data)
            for r in rows
            for s in range(self.work.samples)
        ]
        padding = "x" * self.work.transcript_bytes
        async with sandbox_pool(ctx) as pool:

            async def runner(item: WorkItem) -> EpisodeResult:
                from arena.sandbox import SandboxViolation

                key = f"{ctx.round}/{item.task_id}/{item.sample_idx}"
                try:
                    value = await pool.run_program(
                        PROGRAM, "main", {"key": key, "sleep": self.work.call_seconds}
                    )
                    answer = await self._ask_model(key)
                except (SandboxViolation, ModelError) as exc:
                    # A killed worker, or a model server down past the client's retries: the
                    # episode fails, the round goes on.
                    ctx.metrics.record_episode(item.env, "error", 0.0)
                    return EpisodeResult(
                        reward=0.0, passed=False, finish="error", transcript={"error": str(exc)}
                    )
                reward = _reward(key)
                ctx.metrics.record_episode(item.env, "stop", reward)
                return EpisodeResult(
                    reward=reward,
                    passed=reward > 0.5,
                    transcript={"key": key, "value": value, "answer": answer, "pad": padding},
                )

            stats = await run_work_items(ctx, items, runner, purpose="eval", concurrency=2)
        async with ctx.store.transaction() as s:
            rates = await repo.pass_rates(s, ctx.round)
        for env, rate in rates.items():
            ctx.metrics.env_pass_rate.labels(environment=ctx.metrics.env(env)).set(rate)
        await self._yardstick(ctx)
        return {**stats, "envs": len(envs)}

    async def _ask_model(self, key: str) -> str | None:
        """The episode's model call, when the soak serves a stand-in model."""
        if self.model is None:
            return None
        self.model_faults.calls += 1
        try:
            return (await self.model.chat([Message(role="user", content=key)])).text
        except ModelError:
            self.model_faults.failed_calls += 1
            raise

    async def _yardstick(self, ctx: PhaseContext) -> None:
        drawn = [
            YardstickTaskRow(id=f"standin-y/{i}", env="standin-y", level="easy", data={"i": i})
            for i in range(self.work.yardstick_tasks)
        ]
        async with ctx.store.transaction() as s:
            await repo_yardstick.add_tasks(s, drawn)  # drawn once: existing ones are kept as they are
            live = await repo.latest_checkpoint(s, published=True)
            for row in drawn:
                reward = _reward("yardstick", ctx.round, row.id)
                run = YardstickRunRow(
                    round=ctx.round,
                    stage="live",
                    task_id=row.id,
                    env=row.env,
                    level=row.level,
                    policy=live.id if live is not None else "base",
                    passed=reward > 0.5,
                    reward=reward,
                )
                await repo_yardstick.add_run(s, run)


class StandInStep(BasePhase):
    """DIAGNOSE, PLAN or SYNTHESIZE's shape: a few safe points, and the phase's own rows."""

    def __init__(self, name: str, work: StandInWork) -> None:
        self.name = name
        self.work = work

    async def run(self, ctx: PhaseContext) -> dict[str, Any]:
        for i in range(3):
            await ctx.safe_point()
            ctx.progress(i + 1, 3)
        return {"round": ctx.round, "phase": self.name}

    async def persist(self, session: AsyncSession, ctx: PhaseContext, output: dict[str, Any]) -> None:
        if self.name == "diagnose":
            await repo.save_diagnosis(session, ctx.round, "statistical", {"standin": True, **output})
        elif self.name == "plan":
            for env in env_names(self.work, ctx.round):
                row = CurriculumStateRow(env=env, difficulty=0.3, budget=self.work.tasks, round=ctx.round)
                await repo.upsert_curriculum(session, row)
            await repo.record_event(session, "curriculum", "difficulty.hold", {"round": ctx.round})


def standin_phases(
    work: StandInWork | None = None,
    faults: DiskFaults | None = None,
    model: ChatModel | None = None,
    model_faults: ModelServerFaults | None = None,
) -> list[BasePhase]:
    """The six stand-in phases, in the daemon's order (`ops.soak_train` for TRAIN and PUBLISH);
    with `model`, every stand-in episode also calls it."""
    from ops.soak_train import StandInPublish, StandInTrain

    work = work or StandInWork()
    faults = faults or DiskFaults()
    steps = [StandInStep(name, work) for name in PHASE_ORDER[1:4]]
    return [
        StandInEvaluate(work, model, model_faults),
        *steps,
        StandInTrain(work.checkpoint_kb, faults),
        StandInPublish(work.checkpoint_kb, faults),
    ]
