"""A round that trains on a simulated environment, with the real embedded model as policy
and as helper.

PLAN, with `curriculum.simulated_share = 0.5` and the simulated training gate open
(`simulation.max_false_pass = 1`), gives the simulated weather service half the training budget.
TRAIN then runs one GRPO step over the round's tasks: a bundled library task and a weather task as
the TRUSTEE generator writes them. SYNTHESIZE is not run here: its judged task gates need a judge
that fails a do-nothing episode, and the 135M helper passes every one (`docs/bench-sim.md`), so
with it they keep no simulated task; the stored tasks are what SYNTHESIZE keeps with a trusted
helper (tests/ops/test_simulated_envs.py runs it with scripted judges).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from arena.store import Store
from ops.phases.outputs import EvaluateOutput, PlanOutput, SynthesizeOutput
from ops.phases.plan import PlanPhase
from ops.phases.synthesize import describe_tasks
from ops.phases.tasks import save_tasks
from ops.phases.train import TrainPhase

from ..trainer.tiny import simulated_weather_task

pytestmark = [pytest.mark.model, pytest.mark.slow, pytest.mark.anyio]


async def test_a_round_with_a_simulated_share_trains_on_simulated_episodes(
    make_config, phase_context, embedded_model_path: Path, recorded_rollouts: list[Any]
) -> None:
    from arena.env.registry import Registry
    from simulate.fidelity import usable_tasks
    from simulate.local import LocalChatModel

    config = make_config(
        ARENA_MODELS__POLICY__MODEL=str(embedded_model_path),
        ARENA_MODELS__HELPER__MODEL=str(embedded_model_path),
        ARENA_CURRICULUM__SIMULATED_SHARE="0.5",
        ARENA_CURRICULUM__TASKS_PER_ROUND="4",
        ARENA_SIMULATION__MAX_FALSE_PASS="1",
        ARENA_ROUND__TRAIN_STEPS="1",
        ARENA_ROUND__SAMPLES_PER_TASK="2",
        ARENA_ROUND__MAX_TURNS="2",
        ARENA_ROUND__MAX_TOKENS_PER_TURN="48",
        ARENA_ROUND__CONSTRAIN_TOOL_CALLS="true",
        ARENA_TRAINER__TASKS_PER_STEP="2",
        ARENA_TRAINER__SFT__ENABLED="false",
        ARENA_TRAINER__SYSTEM_PROMPT="compact",
        ARENA_TRAINER__TOOL_SUBSET="0",
    )
    library = Registry().load_all()["library"]
    tasks = [usable_tasks(library, 1, [])[0], simulated_weather_task()]
    helper = LocalChatModel.load(embedded_model_path, device="cpu")
    async with Store(config.database_url) as store:
        await store.migrate()
        evaluated = EvaluateOutput(arena=[], training=["library", "weather"], pass_rates={})
        plan = await PlanPhase().run(phase_context(config, store, 1, [evaluated], phase="plan"))
        assert plan["simulated_training_gate"]["open"] and plan["allocation"]["tasks"]["weather"] == 2
        assert plan["simulated"]["weather"]["n"] == 2
        ctx = phase_context(config, store, 1, phase="train", helper=helper)
        await save_tasks(ctx, tasks)
        earlier = [
            evaluated,
            PlanOutput.model_validate(plan),
            SynthesizeOutput(tasks=describe_tasks(tasks, {}, {})),
        ]
        out = await TrainPhase().run(phase_context(config, store, 1, earlier, phase="train", helper=helper))

    assert out["steps"] == 1
    [(rollout, batch)] = recorded_rollouts
    envs = [key.split("/", 1)[0] for key in batch.keys]
    assert sorted(envs) == ["library", "library", "weather", "weather"]  # one step, both kinds
    for i, (transcript, verdict) in enumerate(batch.episodes):
        if envs[i] == "weather":  # the helper played the tools and judged
            assert transcript.metadata["simulator"]["model"] and verdict.checks[0].kind == "rubric"
        # Policy tokens are trained (unless the group scored alike: then nothing of it is), except
        # those a grammar forced, and nothing else ever is: not the helper's simulated tool
        # results, not template glue. Which tokens a grammar forces depends on what was sampled.
        mask, position = rollout["env_mask"][i], 0
        trained_group = any(mask)
        for segment in transcript.chains[0].segments[1:]:
            span = mask[position : position + len(segment.token_ids)]
            policy = segment.kind == "policy" and trained_group
            forced = set(segment.forced) if segment.kind == "policy" else set()
            assert span == [int(policy and k not in forced) for k in range(len(segment.token_ids))]
            position += len(segment.token_ids)
        assert position == len(mask)
