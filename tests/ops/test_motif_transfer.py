"""Acceptance: a weakness diagnosed on held-out environments steers training tasks elsewhere, by motif.

`ScriptedMotifBlindPolicy` is a scripted fake (not a model): it fails every evaluation task whose
reference exercises one motif (`non_key_lookup`: finding a record by a name or a query) in every
environment and passes all the others. Two rounds run the real DIAGNOSE (statistical path), PLAN
and SYNTHESIZE phases on a real store and the bundled environments; only EVALUATE is replaced by
real graph tasks played by the fake. No training environment shares a tool with an arena one, so
the motif is the only way the weakness can reach training.
"""

from __future__ import annotations

from typing import Any

import pytest

from arena.episode.transcript import Transcript
from arena.store import EpisodeRow, Store, repo
from arena.synth.graph_tasks import synthesize_graph_tasks
from arena.synth.motifs import task_motifs
from arena.tasks.reward import CheckResult, Verdict
from ops.metrics import Metrics
from ops.phases.base import PhaseContext
from ops.phases.diagnose import DiagnosePhase
from ops.phases.evaluate import difficulties
from ops.phases.outputs import EvaluateOutput, SynthesizedTask, SynthesizeOutput
from ops.phases.plan import PlanPhase
from ops.phases.runtime import load_envs
from ops.phases.synthesize import SynthesizePhase
from ops.phases.tasks import save_tasks

pytestmark = pytest.mark.anyio

MOTIF = "non_key_lookup"
ARENA = ["food_delivery", "library", "pharmacy"]
TRAINING = ["banking", "calendar", "email", "flights", "hotels", "project_tracker", "shop_orders"]


class ScriptedMotifBlindPolicy:
    """A scripted fake policy: fails exactly the tasks that exercise `motif`."""

    def __init__(self, motif: str) -> None:
        self.motif = motif

    def play(self, task: Any, write_tools: list[str]) -> tuple[Transcript, Verdict]:
        passed = self.motif not in task_motifs(task, write_tools)
        transcript = Transcript(task_id=task.id, env=task.env, finish="answered", final_answer="done")
        check = CheckResult(kind="state_match", name="state", passed=passed, detail="scripted")
        return transcript, Verdict(reward=float(passed), passed=passed, checks=[check])


def context(config: Any, store: Store, round_no: int, outputs: dict[str, Any]) -> PhaseContext:
    """The context the daemon would build, with the round's earlier `outputs` as stored."""

    async def safe_point() -> None:
        return None

    return PhaseContext(
        round=round_no,
        phase="plan",
        config=config,
        store=store,
        metrics=Metrics(),
        models=None,  # type: ignore[arg-type]  # the statistical diagnosis needs no model
        _safe_point=safe_point,
        _progress=lambda done, total, note: None,
        _outputs=outputs,
    )


async def evaluate(ctx: PhaseContext, policy: ScriptedMotifBlindPolicy, per_env: int) -> dict[str, Any]:
    """EVALUATE's stand-in: fresh graph tasks per arena env at its difficulty, played by the fake."""
    envs = load_envs(ctx)
    levels = await difficulties(ctx)
    for name in ARENA:
        result = await synthesize_graph_tasks(
            envs[name], per_env, seed=ctx.seed, difficulty=levels[name], round_id=ctx.round
        )
        await save_tasks(ctx, result.tasks)
        async with ctx.store.transaction() as s:
            for task in result.tasks:
                transcript, verdict = policy.play(task, envs[name].write_tools)
                await repo.upsert_episode(
                    s,
                    EpisodeRow(
                        round=ctx.round,
                        task_id=task.full_id,
                        sample_idx=0,
                        env=name,
                        purpose="eval",
                        reward=verdict.reward,
                        passed=verdict.passed,
                        finish=transcript.finish,
                        transcript=transcript.model_dump(mode="json"),
                        verdict=verdict.model_dump(mode="json"),
                    ),
                )
    async with ctx.store.transaction() as s:
        rates = await repo.pass_rates(s, ctx.round, purpose="eval")
    return EvaluateOutput(arena=ARENA, training=TRAINING, pass_rates=rates, evaluated=ARENA).stored()


async def run_round(
    config: Any, store: Store, round_no: int, policy: ScriptedMotifBlindPolicy
) -> dict[str, Any]:
    outputs: dict[str, Any] = {}
    outputs["evaluate"] = await evaluate(context(config, store, round_no, outputs), policy, per_env=16)
    for phase in (DiagnosePhase(), PlanPhase(), SynthesizePhase()):
        ctx = context(config, store, round_no, dict(outputs))
        output = await phase.run(ctx)
        async with store.transaction() as s:
            await phase.persist(s, ctx, output)
        outputs[phase.name] = output
    return outputs


async def control_share(config: Any, counts: dict[str, int]) -> float:
    """The motif's share among plain graph tasks of the same environments and counts (no diagnosis)."""
    from ops.phases.synthesize import describe_tasks

    envs = load_envs(context(config, None, 1, {}))  # type: ignore[arg-type]
    tasks = []
    for name, n in sorted(counts.items()):
        tasks += (await synthesize_graph_tasks(envs[name], n, seed=11)).tasks
    return share(describe_tasks(tasks, envs, {}), MOTIF)


def share(tasks: list[SynthesizedTask], motif: str) -> float:
    return sum(motif in t.exercises for t in tasks) / max(1, len(tasks))


async def test_a_motif_failed_in_the_arena_fills_round_two_training_tasks(make_config) -> None:
    config = make_config(
        ARENA_DIAGNOSIS__AGENT="false",
        ARENA_CURRICULUM__TASKS_PER_ROUND="21",
        ARENA_SYNTHESIS__TASKS_PER_WEAK_ENV="8",
        ARENA_SYNTHESIS__COMPLEXIFY_DB="false",
        ARENA_SYNTHESIS__NEW_ENVS_PER_ROUND="0",  # here: the motif reaches existing envs only
    )
    policy = ScriptedMotifBlindPolicy(MOTIF)
    async with Store(config.database_url) as store:
        await store.migrate()
        first = await run_round(config, store, 1, policy)
        second = await run_round(config, store, 2, policy)

    # The diagnosis names the motif (statistics over every arena env), with its interval.
    report = second["diagnose"]["report"]
    assert report["weak_motifs"][0]["motif"] == MOTIF
    assert report["weak_motifs"][0]["pass_rate"] == 0.0 and report["weak_motifs"][0]["envs"]
    # PLAN maps it onto training environments of other categories than the arena's.
    transfer = second["plan"]["transfer"]
    assert transfer["targets"][0]["motif"] == MOTIF
    mapped = set(transfer["mapping"][MOTIF])
    assert len(mapped) >= 4 and mapped <= set(TRAINING)
    assert {g["motif"] for g in second["plan"]["guidelines"]} == {MOTIF}

    # SYNTHESIZE: the training tasks, none in an arena env, most of them exercising the motif,
    # against the share plain tasks of the same environments have without the diagnosis.
    plain_share = await control_share(config, first["synthesize"]["counts"]["env"])
    assert plain_share <= 0.3
    tasks = SynthesizeOutput.model_validate(second["synthesize"]).tasks
    assert tasks and not {t.env for t in tasks} & set(ARENA)
    targeted = [t for t in tasks if t.origin == "targeted"]
    assert targeted and all(t.motif == MOTIF for t in targeted)
    assert second["synthesize"]["counts"]["targeted_motif"] == {MOTIF: len(targeted)}
    assert share(tasks, MOTIF) >= 0.5, (share(tasks, MOTIF), second["synthesize"]["counts"])
    assert (
        share(SynthesizeOutput.model_validate(first["synthesize"]).tasks, MOTIF) >= 0.5
    )  # round 1 already follows its diagnosis
    assert share(tasks, MOTIF) >= plain_share + 0.3
