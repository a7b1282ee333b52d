"""Where no training environment fits the diagnosis, SYNTHESIZE builds one in the daemon.

`ScriptedFakeEnvWriter` is a scripted fake helper (not a model): it answers each step of the
environment synthesis pipeline with the files of a checked fixture (a neighbourhood tool library,
category Lifestyle), as a capable helper would. Everything else is real: PLAN's request, the
pipeline with its sandboxed tool tests, the store, the ledger, graph synthesis and the gates.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from arena.env.registry import Registry
from arena.store import Store, repo
from arena.types import Completion, Message, SamplingParams, ToolSpec, Usage
from diagnose.new_envs import new_env_requests
from diagnose.report import DiagnosisReport, RankedEnv
from diagnose.transfer import TransferPlan
from ops.phases.evaluate import arena_draw
from ops.phases.new_envs import BuildLedger, built_env_names, recently_failed_categories
from ops.phases.runtime import grown_envs_dir, load_envs, sandbox_pool
from ops.phases.synthesize import SynthesizePhase
from ops.phases.tasks import stored_tasks
from work.tasks import prepare_tasks

pytestmark = pytest.mark.anyio

FIXTURE = Path(__file__).parents[1] / "arena" / "synth" / "fixtures" / "tool_library"
FILES = {
    "description": "description.json",
    "schema": "schema.sql",
    "seed": "seed.sql",
    "tool_specs": "tool_specs.json",
    "tools": "tools.py",
    "tests": "tests.toml",
}
TRAINING = ["banking", "calendar", "hotels", "shop_orders"]  # nothing in Lifestyle


class ScriptedFakeEnvWriter:
    """A scripted fake helper: each pipeline step gets the fixture's file for that step."""

    name = "scripted-fake-env-writer"

    def __init__(self, broken: str | None = None) -> None:
        self.calls = 0
        self.broken = broken  # a step answered wrongly every time

    async def chat(
        self,
        messages: list[Message],
        *,
        tools: list[ToolSpec] | None = None,
        params: SamplingParams | None = None,
    ) -> Completion:
        self.calls += 1
        step = messages[0].content.split("\n", 1)[0].removeprefix("Step: ").strip()
        text = "not what was asked" if step == self.broken else (FIXTURE / FILES[step]).read_text()
        return Completion(text=text, usage=Usage(prompt_tokens=10, completion_tokens=len(text) // 4))


def weak_report(env: str = "food_delivery", pass_rate: float = 0.1) -> DiagnosisReport:
    weak = RankedEnv(env=env, score=0.8, rank=1, pass_rate=pass_rate, attempts=8)
    return DiagnosisReport(round=1, source="fallback", weak_envs=[weak])


@pytest.fixture(scope="module")
def envs() -> dict[str, Any]:
    return Registry().load_all()


def test_a_weak_category_without_a_training_env_asks_for_one_near_it(envs) -> None:
    plan = TransferPlan()
    [request] = new_env_requests(weak_report(), envs, TRAINING, plan, 0.5, limit=1)
    assert request.near == "food_delivery" and request.category[0] == "Lifestyle"
    assert "Lifestyle" in request.theme and "no trainable environment in category Lifestyle" in request.why
    # A motif nothing can exercise rides on the request and is named in its theme.
    unmatched = TransferPlan(unmatched=["aggregation"])
    [request] = new_env_requests(weak_report(), envs, TRAINING, unmatched, 0.5, limit=1)
    assert request.motifs == ["aggregation"] and "aggregation" in request.why
    assert "answer from a list of records" in request.theme


def test_no_request_when_a_training_env_fits_or_the_budget_is_zero(envs) -> None:
    plan = TransferPlan()
    # A weak environment whose category has a trainable sibling (hotels: Travel) is covered.
    assert new_env_requests(weak_report("flights"), envs, TRAINING, plan, 0.5, limit=1) == []
    assert new_env_requests(weak_report(), envs, TRAINING, plan, 0.5, limit=0) == []
    # Not weak enough: the threshold decides, as for every other steering.
    assert new_env_requests(weak_report(pass_rate=0.6), envs, TRAINING, plan, 0.5, limit=1) == []
    # A category whose attempt failed lately is not asked for again yet.
    skipped = new_env_requests(
        weak_report(), envs, TRAINING, plan, 0.5, limit=1, skip_categories={"Lifestyle"}
    )
    assert skipped == []


async def test_synthesize_builds_the_env_once_trains_it_and_keeps_it_out_of_the_arena(
    make_config, phase_context, plan_output, envs
) -> None:
    config = make_config(ARENA_SYNTHESIS__TASKS_PER_WEAK_ENV="3")
    [request] = new_env_requests(
        weak_report(), envs, TRAINING, TransferPlan(unmatched=["id_chaining"]), 0.5, 1
    )
    plan = plan_output(new_envs=[request])
    writer = ScriptedFakeEnvWriter()
    async with Store(config.database_url) as store:
        await store.migrate()
        ctx = phase_context(config, store, 1, [plan], helper=writer)
        out = await SynthesizePhase().run(ctx)
        [built] = out["new_envs"]
        assert built["ok"] and built["name"] == "tool_library", built
        assert (grown_envs_dir(ctx) / "tool_library" / "env.toml").is_file()
        assert built_env_names(ctx) == {"tool_library"}
        env = load_envs(ctx)["tool_library"]
        assert env.origin == "synthesized" and env.sandboxed
        # Its tasks come in the same round: targeted at the weak motif, gated like any other.
        tasks = [t for t in out["tasks"] if t["env"] == "tool_library"]
        assert len(tasks) == 3 and all(t["origin"] == "targeted" for t in tasks)
        assert {t["motif"] for t in tasks} == {"id_chaining"}
        # The motif biases the walks (it is no guarantee): most of them chain an id.
        assert sum("id_chaining" in t["exercises"] for t in tasks) >= 2
        async with store.transaction() as s:
            events = await repo.list_events(s, 20)
        assert any(e.action == "env.built" for e in events)

        # TRAIN and EVALUATE prepare its tasks from a fresh load: the policy is shown its tools
        # (a synthesized environment knows their schemas only once a sandbox worker described them).
        stored = (await stored_tasks(ctx, ["tool_library"], ("targeted",)))["tool_library"]
        async with sandbox_pool(ctx) as pool:
            prepared, skipped = await prepare_tasks(stored, load_envs(ctx), sandbox=pool)
        assert not skipped and len(prepared) == 3
        assert all(p.env.tool_specs and "borrow" in " ".join(p.env.tool_names) for p in prepared)

        # A restarted phase builds nothing again and reuses the stored tasks.
        calls = writer.calls
        again = await SynthesizePhase().run(phase_context(config, store, 1, [plan], helper=writer))
        assert writer.calls == calls
        assert sorted(t["id"] for t in again["tasks"]) == sorted(t["id"] for t in out["tasks"])

        # EVALUATE never draws it into the arena: it is training only, and the held-out set is
        # the one drawn without it.
        categories = {n: e.category[0] for n, e in load_envs(ctx).items()}
        draw = arena_draw(ctx, categories)
        without = arena_draw(ctx, {n: c for n, c in categories.items() if n != "tool_library"})
        assert "tool_library" in draw.training and draw.arena == without.arena

        # The same request next round: the name is taken, so nothing is written over, the failure
        # is recorded and the category rests for a while.
        later = await SynthesizePhase().run(phase_context(config, store, 2, [plan], helper=writer))
        [again_built] = later["new_envs"]
        assert not again_built["ok"] and "taken" in again_built["problem"]
        assert recently_failed_categories(phase_context(config, store, 3)) == {"Lifestyle"}
        ledger = json.loads((grown_envs_dir(ctx) / "built.json").read_text())
        assert set(ledger["attempts"]) == {"r1:food_delivery", "r2:food_delivery"}
        assert BuildLedger.load(grown_envs_dir(ctx)).built() == {"tool_library"}


async def test_new_envs_per_round_zero_builds_nothing(make_config, phase_context, plan_output, envs) -> None:
    config = make_config(ARENA_SYNTHESIS__NEW_ENVS_PER_ROUND="0")
    [request] = new_env_requests(weak_report(), envs, TRAINING, TransferPlan(), 0.5, 1)
    plan = plan_output(new_envs=[request])
    writer = ScriptedFakeEnvWriter()
    async with Store(config.database_url) as store:
        await store.migrate()
        ctx = phase_context(config, store, 1, [plan], helper=writer)
        out = await SynthesizePhase().run(ctx)
    assert out["new_envs"] == [] and writer.calls == 0 and built_env_names(ctx) == set()


async def test_new_env_max_tries_bounds_a_failing_step_and_the_category_rests(
    make_config, phase_context, plan_output, envs
) -> None:
    config = make_config(ARENA_SYNTHESIS__NEW_ENV_MAX_TRIES="2")
    [request] = new_env_requests(weak_report(), envs, TRAINING, TransferPlan(), 0.5, 1)
    plan = plan_output(new_envs=[request])
    writer = ScriptedFakeEnvWriter(broken="schema")
    async with Store(config.database_url) as store:
        await store.migrate()
        ctx = phase_context(config, store, 4, [plan], helper=writer)
        out = await SynthesizePhase().run(ctx)
        async with store.transaction() as s:
            events = await repo.list_events(s, 20)
    [record] = out["new_envs"]
    assert not record["ok"] and record["steps"] == {"description": 1, "schema": 2}
    assert "schema" in record["problem"] and writer.calls == 3
    assert not (grown_envs_dir(ctx) / "tool_library").exists() and built_env_names(ctx) == set()
    assert any(e.action == "env.build_failed" for e in events)
    assert recently_failed_categories(phase_context(config, store, 5)) == {"Lifestyle"}
    assert recently_failed_categories(phase_context(config, store, 9)) == set()  # rested long enough


def test_a_broken_folder_in_the_data_dir_is_skipped_not_fatal(make_config, phase_context) -> None:
    config = make_config()
    ctx = phase_context(config, None, 1)
    broken = grown_envs_dir(ctx) / "half_written"
    broken.mkdir(parents=True)
    (broken / "env.toml").write_text('name = "half_written"\nkind = "executable"\n')  # no title, no files
    envs = load_envs(ctx)
    assert "half_written" not in envs and "banking" in envs
