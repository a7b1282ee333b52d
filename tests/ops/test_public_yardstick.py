"""The public yardstick (BFCL multi-turn) in the daemon, with a scripted fake policy: a fixed sample
run every round and reused for a measured policy, its settings, why it did not run, the publish
gate, and three rounds of the real phases in which its entries never reach a training task."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from arena.public.bfcl.model import load_benchmark
from arena.store import Store, public_runs, repo
from ops.phases.base import PhaseContext
from ops.phases.outputs import TrainOutput

from .public_fakes import ScriptedBfclPolicy

pytestmark = pytest.mark.anyio


def with_import(config: Any, bfcl_folder: Path) -> Any:
    """The imported benchmark where the daemon looks for it (DATA_DIR/public/bfcl)."""
    public = config.data.dir / "public"
    public.mkdir(parents=True, exist_ok=True)
    (public / "bfcl").symlink_to(bfcl_folder)
    return config


@pytest.fixture
def context(phase_context: Any) -> Any:
    """`context(config, store, policy, round_no=1, **fields)`: an EVALUATE context (`phase_context`)."""

    def make(config: Any, store: Store, policy: Any, round_no: int = 1, **fields: Any) -> PhaseContext:
        ctx = phase_context(config, store, round_no, phase="evaluate", policy=policy)
        for name, value in fields.items():
            setattr(ctx, name, value)
        return ctx

    return make


async def test_the_same_fixed_sample_runs_every_round_and_a_measured_policy_is_reused(
    make_config, bfcl_folder: Path, context: Any
) -> None:
    from ops.phases import public_yardstick

    config = with_import(make_config(ARENA_PUBLIC__BFCL_PER_CATEGORY="2"), bfcl_folder)
    policy = ScriptedBfclPolicy(load_benchmark(bfcl_folder))
    async with Store(config.database_url) as store:
        await store.migrate()
        first = await public_yardstick.measure(context(config, store, policy), stage="live", policy="base")
        assert first.state == "measured" and first.version == "2026.3.23" and len(first.entries) == 8
        assert list(first.categories) == ["base", "miss_func", "miss_param", "long_context"]
        assert (
            first.categories["base"].passed == 2 and first.overall is not None and first.reused_from is None
        )
        calls = policy.calls
        # Round 2, the same policy: its runs are copied, nothing is played again.
        second = await public_yardstick.measure(
            context(config, store, policy, 2), stage="live", policy="base"
        )
        assert policy.calls == calls and second.reused_from == {"round": 1, "stage": "live"}
        assert second.entries == first.entries and second.overall == first.overall
        # Round 3, another policy: played again, on the same entries.
        third = await public_yardstick.measure(
            context(config, store, policy, 3), stage="live", policy="round-0002"
        )
        assert policy.calls > calls and third.entries == first.entries and third.reused_from is None
        async with store.transaction() as s:
            assert len(await public_runs.runs(s, 3, "live", "bfcl")) == 8
        # A larger sample keeps the smaller one's entries; fewer categories, only theirs.
        bigger = make_config(
            ARENA_PUBLIC__BFCL_PER_CATEGORY="3", ARENA_PUBLIC__BFCL_CATEGORIES="base,long_context"
        )
        more = await public_yardstick.measure(context(bigger, store, policy, 4), stage="live", policy="x")
        assert len(more.entries) == 6 and set(more.categories) == {"base", "long_context"}
        assert {e for e in first.entries if "base" in e or "long" in e} <= set(more.entries)


async def test_why_it_did_not_run_is_said(make_config, bfcl_folder: Path, context: Any) -> None:
    from ops.phases import public_yardstick

    async with Store(make_config().database_url) as store:
        await store.migrate()
        missing = await public_yardstick.measure(
            context(make_config(), store, None), stage="live", policy="base"
        )
        assert missing.state == "not_imported" and "arena envs import-bfcl" in missing.note
        off = make_config(ARENA_PUBLIC__BFCL_PER_CATEGORY="0")
        assert (
            await public_yardstick.measure(context(off, store, None), stage="live", policy="b")
        ).state == "off"
        boxed = with_import(make_config(ARENA_SANDBOX="all"), bfcl_folder)
        ctx = context(boxed, store, None, sandbox_available=False)
        assert (await public_yardstick.measure(ctx, stage="live", policy="b")).state == "unavailable"


async def test_the_backend_runs_sandboxed_with_sandbox_all_and_only_then(
    make_config, bfcl_folder: Path, context: Any
) -> None:
    from ops.phases import public_yardstick

    class RefusingPool:
        """A stand-in for EVALUATE's pool (opened for synthesized environments): must stay unused."""

        async def run_objects(self, *args: Any) -> str:
            raise AssertionError("the BFCL backend ran in the sandbox without ARENA_SANDBOX=all")

    small = {"ARENA_PUBLIC__BFCL_PER_CATEGORY": "1", "ARENA_PUBLIC__BFCL_CATEGORIES": "base"}
    policy = ScriptedBfclPolicy(load_benchmark(bfcl_folder))
    async with Store(make_config().database_url) as store:
        await store.migrate()
        config = with_import(make_config(**small), bfcl_folder)
        out = await public_yardstick.measure(
            context(config, store, policy), stage="live", policy="base", pool=RefusingPool()
        )
        assert (out.sandboxed, out.overall and out.overall.passed) == (False, 1)
        boxed = make_config(**small, ARENA_SANDBOX="all")
        ctx = context(boxed, store, policy, 2, sandbox_available=True)
        out = await public_yardstick.measure(ctx, stage="live", policy="other")
        assert (out.sandboxed, out.overall and out.overall.passed) == (True, 1)


async def test_bfcl_max_steps_caps_each_turn(make_config, bfcl_folder: Path, context: Any) -> None:
    from ops.phases import public_yardstick

    config = with_import(
        make_config(
            ARENA_PUBLIC__BFCL_PER_CATEGORY="1",
            ARENA_PUBLIC__BFCL_CATEGORIES="base",
            ARENA_PUBLIC__BFCL_MAX_STEPS="2",
        ),
        bfcl_folder,
    )
    policy = ScriptedBfclPolicy(load_benchmark(bfcl_folder), always_call=True)
    async with Store(config.database_url) as store:
        await store.migrate()
        out = await public_yardstick.measure(context(config, store, policy), stage="live", policy="base")
        async with store.transaction() as s:
            [row] = await public_runs.runs(s, 1, "live", "bfcl")
    assert policy.calls == 3 and out.errors == {"force_terminated": 1}  # two steps allowed, the third ends it
    assert (row.passed, row.finish, row.error_type) == (False, "force_terminated", "force_terminated")


@pytest.mark.parametrize("gate_on", [True, False])
async def test_the_publish_gate_can_hold_back_a_policy_worse_on_the_public_yardstick(
    make_config, bfcl_folder: Path, gate_on: bool, context: Any
) -> None:
    from ops.phases import public_yardstick
    from ops.phases.publish import PublishPhase

    config = with_import(
        make_config(
            ARENA_PUBLIC__BFCL_PER_CATEGORY="4",
            ARENA_PUBLIC__BFCL_CATEGORIES="base",
            ARENA_PUBLIC__PUBLISH_GATE=str(gate_on).lower(),
            ARENA_ROUND__YARDSTICK_TASKS_PER_LEVEL="0",
        ),
        bfcl_folder,
    )
    root = config.data.dir / "checkpoints"
    parent_dir, bad = root / "round-0000-base", root / "round-0001" / "step-1-bad"
    for folder in (parent_dir, bad):
        folder.mkdir(parents=True)
        (folder / "model.safetensors").write_bytes(b"weights")
    policy = ScriptedBfclPolicy(load_benchmark(bfcl_folder))
    async with Store(config.database_url) as store:
        await store.migrate()
        ctx = context(config, store, policy)
        live = await public_yardstick.measure(ctx, stage="live", policy="base")
        assert live.overall is not None and live.overall.passed == 4
        ctx.phase = "publish"
        ctx = ctx.with_outputs(
            TrainOutput(checkpoint=str(bad), parent=None, parent_dir=str(parent_dir), steps=1)
        )
        out = await PublishPhase().run(ctx)
        async with store.transaction() as s:
            await PublishPhase().persist(s, ctx, out)
        async with store.transaction() as s:
            [event] = [e for e in await repo.list_events(s) if e.action.startswith("publish.")]
    sample = ctx.metrics.registry.get_sample_value
    if gate_on:
        assert out["policy"] == "held back" and policy.loaded == [bad, parent_dir]
        assert out["public_gate"]["publish"] is False and out["public_yardstick"]["overall"]["passed"] == 0
        assert event.action == "publish.held_back" and event.detail["reason"].startswith("public yardstick:")
        assert sample("arena_public_accuracy", {"benchmark": "bfcl", "category": "base"}) is None
    else:
        assert out["policy"] == "updated" and out["public_yardstick"] is None
        assert (
            out["public_gate"]["reason"] == "public.publish_gate is off"
            and event.action == "publish.accepted"
        )


async def test_three_rounds_run_the_same_entries_and_none_reaches_a_training_task(
    make_config, bfcl_folder: Path, run_daemon
) -> None:
    from ops.commands.report import show
    from ops.daemon import Daemon
    from ops.models import ModelHub

    config = with_import(
        make_config(
            ARENA_PUBLIC__BFCL_PER_CATEGORY="1",
            ARENA_ROUND__EVAL_ENVS_PER_CATEGORY="1",
            ARENA_ROUND__EVAL_MAX_ENVS="1",
            ARENA_ROUND__EVAL_TASKS_PER_ENV="1",
            ARENA_ROUND__EVAL_SIMULATED="false",
            ARENA_ROUND__YARDSTICK_TASKS_PER_LEVEL="1",
            ARENA_ROUND__TRAIN_STEPS="0",
            ARENA_CURRICULUM__TASKS_PER_ROUND="3",
            ARENA_DIAGNOSIS__AGENT="false",
            ARENA_SYNTHESIS__NEW_ENVS_PER_ROUND="0",
            ARENA_SYNTHESIS__COMPLEXIFY_DB="false",
            ARENA_DAEMON__MAX_PHASE_FAILURES="1",
        ),
        bfcl_folder,
    )
    bench = load_benchmark(bfcl_folder)
    policy = ScriptedBfclPolicy(bench)
    models = ModelHub(config)
    models.set("policy", policy)
    models.set("helper", policy)
    daemon = Daemon(config, models=models, max_rounds=3, handle_signals=False)
    async with run_daemon(daemon):
        pass
    assert daemon.rounds_completed == 3 and not daemon.paused
    exposition = daemon.metrics.exposition().decode()
    assert 'arena_public_accuracy{benchmark="bfcl",category="all"}' in exposition

    report = await _report(config, show)
    samples = [r["public_yardstick"]["entries"] for r in report]
    assert len(samples) == 3 and samples[0] == samples[1] == samples[2] and len(samples[0]) == 4
    assert [r["public_yardstick"]["state"] for r in report] == ["measured"] * 3
    questions = {
        m["content"] for e in bench.entries.values() for entry in e for turn in entry.turns for m in turn
    }
    async with Store(config.database_url) as store, store.transaction() as s:
        tasks = [t for r in (1, 2, 3) for t in await repo.tasks_for_round(s, r)]
        episodes = [e for r in (1, 2, 3) for e in await repo.episodes_for_round(s, r, purpose=None)]
    assert tasks, "SYNTHESIZE made training tasks"
    assert not any(t.env.startswith("bfcl") or t.data.get("instruction") in questions for t in tasks)
    assert not any(e.env.startswith("bfcl") for e in episodes)
    # The daemon's policy saw the BFCL questions only in the public yardstick's episodes.
    assert questions & set(policy.firsts)

    # `arena status` shows the last round's public yardstick.
    from ops.commands.admin import _render_status
    from ops.status import status_document

    async with Store(config.database_url) as store:
        stopped = SimpleNamespace(
            store=store, round=None, phase=None, stopping=False, ready=True, models_up=True,
            sandbox={"available": True, "detail": "bubblewrap"}, progress_state={}, rounds_completed=3,
            paused=False, paused_since=None, config=config, cluster=None,
        )  # fmt: skip
        doc = await status_document(stopped, "0.1.0")  # type: ignore[arg-type]
    public = doc["last_public_yardstick"]
    assert (
        public["state"] == "measured" and public["version"] == bench.version and public["overall"]["n"] == 4
    )
    assert "public:     " in _render_status(doc) and "bfcl 2026.3.23" in _render_status(doc)


async def _report(config: Any, show: Any) -> list[dict[str, Any]]:
    """`arena report --json` on the daemon's store (the CLI runs its own event loop: a thread)."""
    import contextlib
    import io
    import os

    import anyio.to_thread

    def run() -> str:
        out = io.StringIO()
        os.environ["ARENA_DATA_DIR"] = str(config.data.dir)
        try:
            with contextlib.redirect_stdout(out):
                show(SimpleNamespace(json=True, rounds=None, config=None))
        finally:
            del os.environ["ARENA_DATA_DIR"]
        return out.getvalue()

    return json.loads(await anyio.to_thread.run_sync(run))["rounds"]
