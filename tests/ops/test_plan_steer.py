"""PLAN's steering keys: curriculum.weak_threshold, synthesis.tasks_per_weak_env, synthesis.complexify_db/_rows,
synthesis.new_envs_per_round."""

from __future__ import annotations

from typing import Any

import pytest

from arena.env.registry import Registry
from curriculum.state import CurriculumState
from diagnose.motifs import WeakMotif
from diagnose.report import DiagnosisReport, FailurePattern, RankedEnv
from ops.phases.plan_steer import steer_training

TRAINING = ["banking", "calendar", "hotels", "shop_orders"]


def report(pass_rate: float) -> DiagnosisReport:
    """A weak arena env (food_delivery) failing lookups by name, with wrong-entity failures."""
    motif = WeakMotif(
        motif="non_key_lookup",
        score=0.6,
        attempts=8,
        passed=round(8 * pass_rate),
        pass_rate=pass_rate,
        pass_low=0.0,
        pass_high=0.5,
        envs=["food_delivery"],
    )
    weak = RankedEnv(env="food_delivery", score=0.7, rank=1, pass_rate=pass_rate, attempts=8)
    pattern = FailurePattern(
        category="wrong_entity", env="food_delivery", description="other restaurant", episode_ids=["x#0"]
    )
    return DiagnosisReport(
        round=2, source="fallback", weak_envs=[weak], weak_motifs=[motif], patterns=[pattern]
    )


@pytest.fixture(scope="module")
def envs() -> dict[str, Any]:
    return Registry().load_all()


def steer(
    phase_context, make_config, envs: dict[str, Any], pass_rate: float = 0.2, **env: str
) -> dict[str, Any]:
    config = make_config(ARENA_CURRICULUM__TASKS_PER_ROUND="12", **env)
    return steer_training(
        phase_context(config, round_no=2), report(pass_rate), envs, TRAINING, CurriculumState()
    )


def test_weak_threshold_decides_which_findings_steer(phase_context, make_config, envs) -> None:
    steered = steer(phase_context, make_config, envs, pass_rate=0.4, ARENA_CURRICULUM__WEAK_THRESHOLD="0.5")
    assert steered["transfer"]["targets"][0]["motif"] == "non_key_lookup"
    assert steered["guidelines"] and steered["budget"]["targeted"] > 0
    aside = steer(phase_context, make_config, envs, pass_rate=0.4, ARENA_CURRICULUM__WEAK_THRESHOLD="0.3")
    assert aside["transfer"]["targets"] == [] and aside["guidelines"] == []
    assert any("weak_threshold 0.3" in why for why in aside["transfer"]["set_aside"])
    # The arena env is not weak enough either: no extra weight for its category's training envs.
    assert all(c["weakness"] == 0 for c in aside["candidates"])


def test_tasks_per_weak_env_sizes_the_targeted_share(phase_context, make_config, envs) -> None:
    none = steer(phase_context, make_config, envs, ARENA_SYNTHESIS__TASKS_PER_WEAK_ENV="0")
    assert none["guidelines"] == [] and none["budget"]["targeted"] == 0
    two = steer(phase_context, make_config, envs, ARENA_SYNTHESIS__TASKS_PER_WEAK_ENV="2")
    assert two["guidelines"] and all(g["n_tasks"] <= 2 for g in two["guidelines"])
    for g in two["guidelines"]:
        # The rest of the env's budget is plain tasks spread over difficulties.
        rest = two["allocation"]["tasks"][g["env"]] - g["n_tasks"]
        assert sum(p["n"] for p in two["spread"][g["env"]]) == rest
    assert two["budget"]["targeted"] == sum(g["n_tasks"] for g in two["guidelines"])


def test_complexify_db_and_rows_choose_one_env_per_round(phase_context, make_config, envs) -> None:
    on = steer(phase_context, make_config, envs, ARENA_SYNTHESIS__COMPLEXIFY_ROWS="7")
    assert len(on["complexify"]) == 1 and on["complexify"][0]["rows"] == 7
    assert on["complexify"][0]["env"] in TRAINING
    assert steer(phase_context, make_config, envs, ARENA_SYNTHESIS__COMPLEXIFY_DB="false")["complexify"] == []
    assert steer(phase_context, make_config, envs, ARENA_SYNTHESIS__COMPLEXIFY_ROWS="0")["complexify"] == []


@pytest.mark.anyio
async def test_synthesize_grows_the_chosen_database_once_per_round(phase_context, make_config, envs) -> None:
    from ops.phases.outputs import ComplexifyRequest
    from ops.phases.runtime import load_envs
    from ops.phases.synthesize import SynthesizePhase

    ctx = phase_context(make_config(), round_no=2)
    before = envs["library"].version
    chosen = [ComplexifyRequest(env="library", why="weak motif non_key_lookup", rows=3)]
    grown = await SynthesizePhase()._complexify(ctx, chosen)
    assert grown[0]["env"] == "library" and sum(grown[0]["added"].values()) > 0
    after = load_envs(ctx)["library"]
    assert after.version == grown[0]["version_after"] != before
    assert await SynthesizePhase()._complexify(ctx, chosen) == []  # a restart does not grow it twice
    ctx.config.synthesis.complexify_db = False
    ctx.round = 3
    assert await SynthesizePhase()._complexify(ctx, chosen) == []


def test_new_envs_per_round_asks_for_an_env_where_no_training_category_fits(
    phase_context, make_config, envs
) -> None:
    """food_delivery (Lifestyle) is weak and no training environment is in Lifestyle."""
    on = steer(phase_context, make_config, envs)
    [request] = on["new_envs"]
    assert request["near"] == "food_delivery" and request["category"][0] == "Lifestyle"
    assert "Lifestyle" in request["theme"]
    assert steer(phase_context, make_config, envs, ARENA_SYNTHESIS__NEW_ENVS_PER_ROUND="0")["new_envs"] == []
