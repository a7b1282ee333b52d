"""Typed phase outputs: a later phase reads an earlier one's stored output only through its model."""

from __future__ import annotations

from dataclasses import replace

import pytest

from arena.store import Store, repo
from ops.phases.base import PhaseOutputError, read_output
from ops.phases.outputs import EvaluateOutput, PlanOutput, SynthesizeOutput, TrainOutput
from ops.phases.plan import PlanPhase

EVALUATED = {
    "arena": ["weather"],
    "training": ["banking", "library"],
    "pass_rates": {"weather": 0.5},
    "category_pass_rates": {"Lifestyle": 0.5},  # a key no later phase reads: kept as it is
    "episodes": 4,
}


def test_a_stored_output_is_read_through_its_phases_model(phase_context, make_config) -> None:
    ctx = phase_context(make_config(), phase="plan")
    ctx = ctx.with_outputs(EvaluateOutput.model_validate(EVALUATED))
    evaluate = ctx.output(EvaluateOutput)
    assert evaluate is not None and evaluate.training == ["banking", "library"]
    assert evaluate.pass_rates == {"weather": 0.5}
    assert evaluate.model_extra == {"category_pass_rates": {"Lifestyle": 0.5}, "episodes": 4}
    assert ctx.require_output(EvaluateOutput) == evaluate


def test_the_stored_form_is_what_the_phase_set_and_nothing_a_default_filled_in() -> None:
    skipped = {"skipped": "no training tasks", "steps": 0, "checkpoint": None}
    assert TrainOutput.model_validate(skipped).stored() == skipped
    assert EvaluateOutput.model_validate(EVALUATED).stored() == EVALUATED
    assert TrainOutput(checkpoint="/c", steps=2, peak_rss_mb=512.0).stored() == {
        "checkpoint": "/c",
        "steps": 2,
        "peak_rss_mb": 512.0,
    }


def test_an_output_of_a_phase_not_run_this_round_is_none_or_an_error_where_required(
    phase_context, make_config
) -> None:
    ctx = phase_context(make_config(), round_no=4, phase="publish")
    ctx = ctx.with_outputs(EvaluateOutput.model_validate(EVALUATED))
    assert ctx.output(TrainOutput) is None
    with pytest.raises(PhaseOutputError, match=r"round 4: phase 'publish' needs the output of phase 'train'"):
        ctx.require_output(TrainOutput)
    # `with_outputs` copies: the context it was called on keeps what it saw.
    later = ctx.with_outputs(TrainOutput(checkpoint=None, steps=0))
    assert later.output(TrainOutput) is not None and ctx.output(TrainOutput) is None
    assert later.output(EvaluateOutput) == ctx.output(EvaluateOutput)


@pytest.mark.parametrize(
    ("stored", "problem"),
    [
        ({**EVALUATED, "arena": "weather"}, r"arena: Input should be a valid list"),
        (
            {**EVALUATED, "pass_rates": {"weather": "high"}},
            r"pass_rates\.weather: Input should be a valid number",
        ),
        # A field the producer always writes is never filled in with a default.
        ({k: v for k, v in EVALUATED.items() if k != "training"}, r"training: Field required"),
        ([], r"\(output\): Input should be a valid dictionary"),
    ],
)
def test_a_malformed_stored_output_is_an_error_naming_the_phase_and_the_problem(
    phase_context, make_config, stored, problem
) -> None:
    ctx = phase_context(make_config(), round_no=7, phase="plan")
    ctx = replace(ctx, _outputs={"evaluate": stored})  # as the daemon hands a resumed round's outputs
    with pytest.raises(PhaseOutputError) as raised:
        ctx.output(EvaluateOutput)
    message = str(raised.value)
    assert message.startswith(
        "round 7: the stored output of phase 'evaluate' does not match EvaluateOutput: "
    )
    assert raised.match(problem)


def test_plans_and_synthesizes_nested_shapes_are_checked() -> None:
    plan = {
        "allocation": {"tasks": {"banking": 2}, "weights": {"banking": 1.0}, "executable_budget": 2},
        "guidelines": [],
        "spread": {"banking": [{"difficulty": {"walk_length": 9}, "n": 2}]},
        "simulated": {},
        "complexify": [],
        "new_envs": [],
    }
    with pytest.raises(PhaseOutputError) as raised:
        read_output(PlanOutput, plan, 3)
    assert raised.match(r"allocation\.simulated_budget: Field required")
    assert raised.match(
        r"spread\.banking\.0\.difficulty\.walk_length: Input should be less than or equal to 6"
    )
    line = {"id": "banking/g-1", "env": "banking", "origin": "graph", "difficulty": {}}
    with pytest.raises(PhaseOutputError, match=r"phase 'synthesize'.*tasks\.0\.motif: Field required"):
        read_output(SynthesizeOutput, {"tasks": [line]}, 3)


@pytest.mark.anyio
async def test_plan_reads_the_round_befores_training_rollouts_through_trains_model(
    phase_context, make_config
) -> None:
    config = make_config()
    async with Store(config.database_url) as store:
        await store.migrate()
        async with store.transaction() as s:
            await repo.ensure_round(s, 1)
            await repo.start_phase(s, 1, "train")
            await repo.finish_phase(s, 1, "train", {"checkpoint": "/c", "steps": "two"})
        ctx = phase_context(config, store, 2, phase="plan")
        with pytest.raises(
            PhaseOutputError, match=r"round 1: .* phase 'train' .*steps: Input should be a valid"
        ):
            await PlanPhase().run(ctx)
