"""PLAN: difficulty per environment, the training task budget, and what the diagnosis changes.

1. `curriculum.controller.update_curriculum` folds this round's verified evaluation episodes and
   the previous round's GRPO rollouts (per-task counts kept by TRAIN), each with the difficulty its
   task was synthesized at, into the per-environment evidence; decisions rest on intervals.
2. The diagnosis moves to training by motif (`diagnose.transfer`): each weak motif (pass rate
   below `curriculum.weak_threshold`) is mapped onto every training environment whose tools can
   exercise it, whatever its category; those environments get weight in the allocation and a
   guideline for up to `synthesis.tasks_per_weak_env` targeted tasks. A weak arena environment
   also weighs its category's training environments, as before.
3. `curriculum.sampling.allocate_tasks` splits `curriculum.tasks_per_round` over the training
   environments: executable ones, and simulated ones (`curriculum.simulated_share` of the budget) while
   the helper's measured judge false-pass rate is below `simulation.max_false_pass`
   (`ops.phases.simulated_training_gate`; a withheld budget is an event).
4. The rest of each environment's tasks spread over its current difficulty and probes ±1 on one
   knob (`curriculum.probes.spread`), so the next decisions can tell the knobs apart.
5. With `synthesis.complexify_db`, one training environment per round whose diagnosis points at
   scale or ambiguity is chosen to have its database grown by SYNTHESIZE.
6. A weak arena environment whose category has no trainable environment, or a weak motif none
   can exercise, asks SYNTHESIZE for a new environment near it (`diagnose.new_envs`; at most
   `synthesis.new_envs_per_round`).
The state rows and every decision (with its evidence) are written with the phase's done mark; the
output keeps the motif mapping, budgets and spread for `arena report`.
"""

from __future__ import annotations

from typing import Any

from sqlmodel.ext.asyncio.session import AsyncSession

from arena.store import CurriculumStateRow, repo
from ops.phases.base import BasePhase, PhaseContext, read_output
from ops.phases.outputs import EvaluateOutput, PlanOutput, TrainOutput
from ops.phases.plan_steer import steer_training
from ops.phases.runtime import describe_sandboxed, load_envs
from ops.phases.simulated_training_gate import simulated_training_gate


def task_difficulty(data: dict[str, Any]) -> Any:
    """The curriculum knobs of a stored task's difficulty record (other keys ignored)."""
    from arena.difficulty import KNOBS, Difficulty

    knobs = {
        k: int(v)
        for k, v in (data.get("difficulty") or {}).items()
        if k in KNOBS and isinstance(v, int | float)
    }
    try:
        return Difficulty(**knobs)
    except ValueError:
        return Difficulty()


def training_outcomes(train: TrainOutput | None, tasks: dict[str, dict[str, Any]]) -> list[Any]:
    """The GRPO rollouts of a finished TRAIN phase as curriculum outcomes (one per episode)."""
    from curriculum.state import EpisodeOutcome

    out: list[EpisodeOutcome] = []
    for o in train.rollouts() if train is not None else []:
        difficulty = task_difficulty(tasks.get(o.task, {}))
        out.extend(
            EpisodeOutcome(env=o.env, passed=i < o.passed, difficulty=difficulty) for i in range(o.episodes)
        )
    return out


class PlanPhase(BasePhase):
    """Curriculum: difficulty per environment, the task mix and the guidelines."""

    name = "plan"

    async def run(self, ctx: PhaseContext) -> dict[str, Any]:
        from curriculum.controller import update_curriculum
        from curriculum.state import CurriculumState, EnvCurriculum, EpisodeOutcome
        from diagnose.wiring import load_report

        cconf = ctx.config.curriculum
        async with ctx.store.transaction() as s:
            rows = await repo.curriculum_states(s)
            episodes = await repo.episodes_for_round(s, ctx.round, purpose="eval")
            tasks = {t.id: t.data for t in await repo.tasks_for_round(s, ctx.round)}
            report = await load_report(s, ctx.round)
            # Last round's training rollouts: its TRAIN ran after its PLAN, so they are new here.
            last_train = await repo.get_phase(s, ctx.round - 1, "train") if ctx.round > 1 else None
            train_output: TrainOutput | None = None
            train_tasks: dict[str, dict[str, Any]] = {}
            if last_train is not None and last_train.status == "done":
                train_output = read_output(TrainOutput, last_train.output, ctx.round - 1)
                train_tasks = {t.id: t.data for t in await repo.tasks_for_round(s, ctx.round - 1)}
        state = CurriculumState(
            round=max((r.round for r in rows.values()), default=0),
            envs={env: EnvCurriculum.model_validate(r.data) for env, r in rows.items() if r.data},
        )
        outcomes = [
            EpisodeOutcome(
                env=ep.env, passed=ep.passed, difficulty=task_difficulty(tasks.get(ep.task_id, {}))
            )
            for ep in episodes
        ]
        from_training = training_outcomes(train_output, train_tasks)
        outcomes += from_training
        envs = load_envs(ctx)
        # Without EVALUATE this round (a plan run on its own), every environment may train.
        evaluate = ctx.output(EvaluateOutput)
        arena = [n for n in evaluate.arena if n in envs] if evaluate is not None else []
        drawn = evaluate.training if evaluate is not None else []
        training = [n for n in drawn or sorted(envs) if n in envs and n not in arena]
        new_state, decisions = update_curriculum(state, outcomes, cconf, ctx.round, [*arena, *training])
        await describe_sandboxed(ctx, envs, training)  # their write tools decide their motifs
        training = [n for n in training if n in envs]
        trainable = [n for n in training if envs[n].kind == "executable"]
        simulated = [n for n in training if envs[n].kind == "simulated"]
        gate = None
        if simulated and ctx.config.curriculum.simulated_share > 0:
            gate = await simulated_training_gate(ctx)
            trainable += simulated if gate.open else []
        steer = steer_training(ctx, report, envs, trainable, new_state)
        return PlanOutput.model_validate(
            {
                "state": new_state.model_dump(mode="json"),
                "decisions": [d.model_dump(mode="json") for d in decisions],
                "outcomes": len(outcomes),
                "training_outcomes": len(from_training),
                "untrainable": [n for n in training if n not in trainable],
                "simulated_training_gate": gate.model_dump(mode="json") if gate is not None else None,
                **steer,
            }
        ).stored()

    async def persist(self, session: AsyncSession, ctx: PhaseContext, output: dict[str, Any]) -> None:
        """Each environment's curriculum row and every difficulty change (an event with its reason)."""
        from arena.difficulty import Difficulty

        budget = output["allocation"]["tasks"]
        for env, record in output["state"]["envs"].items():
            old = await session.get(CurriculumStateRow, env)
            history = [*(old.pass_history if old else []), record.get("success_ema")][-50:]
            score = Difficulty.model_validate(record.get("difficulty", {})).score()
            await repo.upsert_curriculum(
                session,
                CurriculumStateRow(
                    env=env,
                    difficulty=score,
                    budget=int(budget.get(env, 0)),
                    round=ctx.round,
                    pass_history=[h for h in history if h is not None],
                    data=record,
                ),
            )
            ctx.metrics.difficulty.labels(environment=ctx.metrics.env(env)).set(score)
            ctx.metrics.task_budget.labels(environment=ctx.metrics.env(env)).set(int(budget.get(env, 0)))
        gate = output.get("simulated_training_gate")
        if gate is not None and not gate["open"]:
            await repo.record_event(session, "curriculum", "simulated.withheld", gate)
        for decision in output["decisions"]:
            if decision["action"] in ("raise", "lower"):
                await repo.record_event(session, "curriculum", f"difficulty.{decision['action']}", decision)
