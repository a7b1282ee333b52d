"""The yardstick: drawn once, never trained on, measured with every tool, reused for the same policy,
and the publish gate that holds back a policy worse than its parent (scripted fake policies)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from arena.store import Store, repo, repo_yardstick
from ops.metrics import Metrics
from ops.phases.base import PhaseContext
from ops.phases.outputs import TrainOutput
from ops.phases.yardstick_scores import gate, paired_change, score, summarize

HERE = Path(__file__).parent


def _fakes() -> Any:
    spec = importlib.util.spec_from_file_location("arena_test_yardstick_fakes", HERE / "yardstick_fakes.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def run(task: str, passed: bool, env: str = "banking", level: str = "easy") -> SimpleNamespace:
    return SimpleNamespace(task_id=task, env=env, level=level, passed=passed)


def test_scores_pool_levels_and_environments_with_wilson_intervals() -> None:
    runs = [run("a", True), run("b", False, level="hard"), run("c", True, env="library")]
    out = summarize(runs, stage="live", policy="base")
    assert out.overall == score(2, 3) and out.tasks == 3
    assert out.envs["banking"]["all"] == score(1, 2) and out.envs["banking"]["hard"] == score(0, 1)
    assert out.envs["library"] == {"easy": score(1, 1), "all": score(1, 1)}
    # 8 out of 10: the textbook Wilson interval.
    assert (round(score(8, 10).low, 3), round(score(8, 10).high, 3)) == (0.49, 0.943)


def test_a_paired_change_tells_what_two_intervals_side_by_side_cannot() -> None:
    """40 tasks, 2 passed before and 8 after (6 gained, none lost): the two Wilson intervals
    overlap, the paired interval of the same runs lies above 0."""
    before = [run(f"t{i}", i < 2) for i in range(40)]
    after = [run(f"t{i}", i < 8) for i in range(40)]
    b, a = score(2, 40), score(8, 40)
    assert a.low < b.high  # side by side: not told apart
    change = paired_change(before, after)
    assert change is not None and (change.gained, change.lost, change.tasks) == (6, 0, 40)
    assert change.diff == pytest.approx(0.15) and change.low > 0
    assert change.text().startswith("+0.15 [+")
    assert paired_change(before, [run("other", True)]) is None


def test_gate_holds_back_only_a_candidate_paired_worse_than_its_parent() -> None:
    parent = [run(f"t{i}", True) for i in range(6)]  # 6/6: interval [0.61, 1]
    worse = [run(f"t{i}", i < 3) for i in range(6)]  # 3/6 = 0.5 < 0.61
    close = [run(f"t{i}", i < 5) for i in range(6)]  # 5/6 = 0.83: inside the parent's interval
    held = gate(parent, worse, enabled=True)
    assert not held.publish and held.candidate == score(3, 6) and held.parent == score(6, 6)
    assert held.change is not None and held.change.lost == 3 and held.change.high < 0
    assert "is worse than the parent's" in held.reason and "(0 gained, 3 lost)" in held.reason
    # One task lost of six: the paired interval still reaches 0, so it is not shown to be worse.
    kept = gate(parent, close, enabled=True)
    assert kept.publish and kept.change is not None and kept.change.high == 0.0
    assert gate(parent, worse, enabled=False).publish  # trainer.publish_gate = false
    # Only tasks both policies ran are compared; none in common: nothing to hold back on.
    assert gate(parent, [run("other", False)], enabled=True).publish
    # As good as the parent is never worse, even where both fail everything (the interval then
    # starts at exactly 0: the 3-round CPU demo held back every round on a float's 3e-17).
    nothing = [run(f"t{i}", False) for i in range(6)]
    same = gate(nothing, nothing, enabled=True)
    assert same.publish and same.parent is not None and same.parent.low == 0.0
    assert score(6, 6).high == 1.0


def context(config: Any, store: Store, policy: Any, round_no: int = 1) -> PhaseContext:
    async def safe_point() -> None:
        return None

    async def load_policy() -> Any:
        return policy

    return PhaseContext(
        round=round_no,
        phase="evaluate",
        config=config,
        store=store,
        metrics=Metrics(),
        models=SimpleNamespace(policy=load_policy, helper=load_policy, policy_weights=None),  # type: ignore[arg-type]
        _safe_point=safe_point,
        _progress=lambda done, total, note: None,
    )


SMALL = {
    "ARENA_ROUND__YARDSTICK_TASKS_PER_LEVEL": "1",
    "ARENA_ROUND__EVAL_MAX_ENVS": "1",
    "ARENA_ROUND__EPISODE_CONCURRENCY": "1",
    "ARENA_ROUND__MAX_TURNS": "8",
    "ARENA_TRAINER__TOOL_SUBSET": "0",
}


@pytest.mark.anyio
async def test_yardstick_is_drawn_once_measured_with_every_tool_and_reused_for_the_same_policy(
    make_config,
) -> None:
    from ops.phases import yardstick
    from ops.phases.held_out import fingerprint
    from ops.phases.runtime import load_envs
    from ops.phases.synth_dispatch import graph_tasks
    from ops.phases.yardstick_scores import LEVELS

    fakes = _fakes()
    config = make_config(**SMALL)
    async with Store(config.database_url) as store:
        await store.migrate()
        policy = fakes.ScriptedReferencePolicy([])
        ctx = context(config, store, policy)
        envs = load_envs(ctx)
        tasks, levels = await yardstick.ensure_drawn(ctx, envs, ["banking", "library"], None)
        assert tasks and {t.env for t in tasks} == {"banking"}  # eval_max_envs = 1, picked by the daemon seed
        assert all(t.id.startswith(f"ys-{levels[t.full_id]}-") for t in tasks)
        assert set(levels.values()) <= set(LEVELS) and len(tasks) <= len(LEVELS)
        # Drawn once: another round, other candidates, another size: the same tasks.
        again = context(
            make_config(**{**SMALL, "ARENA_ROUND__YARDSTICK_TASKS_PER_LEVEL": "3"}), store, policy, 5
        )
        same, _ = await yardstick.ensure_drawn(again, envs, ["library"], None)
        assert [t.full_id for t in same] == [t.full_id for t in tasks]

        policy.by_instruction = {t.instruction: t for t in tasks}
        out = await yardstick.measure(ctx, envs, tasks, levels, stage="live", policy="base", pool=None)
        assert out["overall"]["n"] == len(tasks) and out["tool_subset"] is None and out["reused_from"] is None
        assert out["overall"]["passed"] == len(tasks), "replaying the references passes every task"
        # Every tool, although trainer.tool_subset = 0 would show only the reference tools.
        assert policy.tools_shown == {len(envs["banking"].tool_names)}
        calls = policy.calls
        # Round 2, same policy, same tasks: the runs are copied, nothing is run again.
        ctx2 = context(config, store, policy, round_no=2)
        out2 = await yardstick.measure(ctx2, envs, tasks, levels, stage="live", policy="base", pool=None)
        assert policy.calls == calls and out2["reused_from"] == {"round": 1, "stage": "live"}
        assert out2["overall"] == out["overall"]
        async with store.transaction() as s:
            assert len(await repo_yardstick.runs(s, 2, "live")) == len(tasks)
        # Another policy is measured afresh.
        out3 = await yardstick.measure(
            ctx2, envs, tasks, levels, stage="candidate", policy="round-0002", pool=None
        )
        assert out3["reused_from"] is None and policy.calls > calls

        # Never trained on: training synthesis that lands on a yardstick task drops it.
        easy = [t for t in tasks if levels[t.full_id] == "easy"]
        seed = yardstick._seed(ctx, 0)
        redrawn = await graph_tasks(
            ctx, envs["banking"], 1, seed=seed, difficulty=LEVELS["easy"], sandbox=None, reports=[]
        )
        assert easy and redrawn == []
        labelled = await graph_tasks(
            ctx,
            envs["banking"],
            1,
            seed=seed,
            difficulty=LEVELS["easy"],
            sandbox=None,
            reports=[],
            label="yardstick",
        )
        assert [fingerprint(t) for t in labelled] == [fingerprint(t) for t in easy]


@pytest.mark.anyio
@pytest.mark.parametrize("gate_on", [True, False])
async def test_publish_holds_back_a_policy_worse_than_its_parent_and_records_the_decision(
    make_config, gate_on: bool
) -> None:
    from ops.phases import yardstick
    from ops.phases.publish import PublishPhase
    from ops.phases.runtime import load_envs

    fakes = _fakes()
    config = make_config(**SMALL, ARENA_TRAINER__PUBLISH_GATE=str(gate_on).lower())
    root = config.data.dir / "checkpoints"
    parent_dir, bad = root / "round-0000-base", root / "round-0001" / "step-1-bad"
    for folder in (parent_dir, bad):
        folder.mkdir(parents=True)
        (folder / "model.safetensors").write_bytes(b"weights")
    async with Store(config.database_url) as store:
        await store.migrate()
        policy = fakes.ScriptedReferencePolicy([])
        ctx = context(config, store, policy)
        envs = load_envs(ctx)
        tasks, levels = await yardstick.ensure_drawn(ctx, envs, ["banking"], None)
        policy.by_instruction = {t.instruction: t for t in tasks}
        await yardstick.measure(ctx, envs, tasks, levels, stage="live", policy="base", pool=None)
        ctx.phase = "publish"
        ctx = ctx.with_outputs(
            TrainOutput(checkpoint=str(bad), parent=None, parent_dir=str(parent_dir), steps=1)
        )
        out = await PublishPhase().run(ctx)
        async with store.transaction() as s:
            await PublishPhase().persist(s, ctx, out)
        async with store.transaction() as s:
            events = await repo.list_events(s)
            live = await repo.latest_checkpoint(s, published=True)
            row = await repo.latest_checkpoint(s)
    [event] = [e for e in events if e.action.startswith("publish.")]
    if gate_on:
        assert out["policy"] == "held back" and policy.loaded == [bad, parent_dir]
        assert ctx.models.policy_weights == parent_dir and live is None
        assert row is not None and not row.published and row.metrics["gate"]["publish"] is False
        assert event.action == "publish.held_back" and event.detail["candidate"]["passed"] == 0
        assert out["yardstick"]["overall"]["passed"] == 0
        assert (
            ctx.metrics.registry.get_sample_value("arena_publish_decisions_total", {"decision": "held_back"})
            == 1
        )
    else:
        assert out["policy"] == "updated" and policy.loaded == [bad] and live is not None
        assert event.action == "publish.accepted" and event.detail["reason"] == "trainer.publish_gate is off"


def test_the_history_compares_each_round_with_the_first_and_the_previous() -> None:
    from ops.metrics import Metrics
    from ops.yardstick_history import build_history, set_change_metrics, table

    def live(passed: list[bool], policy: str) -> list[SimpleNamespace]:
        return [SimpleNamespace(**vars(run(f"t{i}", p)), policy=policy) for i, p in enumerate(passed)]

    stages = {
        1: {"live": live([False] * 4, "base")},
        2: {"live": live([True, False, False, False], "round-0001")},
        3: {"live": live([True, True, True, False], "round-0002")},
    }
    history = build_history(stages)
    assert [h.round for h in history] == [1, 2, 3]
    assert history[0].since_first is None and history[0].since_previous is None
    assert history[2].since_first is not None and history[2].since_first.gained == 3
    assert history[2].since_previous is not None and history[2].since_previous.gained == 2
    metrics = Metrics()
    set_change_metrics(metrics, history[2])
    value = metrics.registry.get_sample_value("arena_yardstick_change", {"since": "first", "bound": "value"})
    assert value == pytest.approx(0.75)
    rows = table(history)
    assert len(rows) == 4 and rows[3].startswith("    3  0.75 [") and "+0.75 [" in rows[3]


def test_a_warm_up_not_measured_apart_is_never_reported_as_grpos_share() -> None:
    """The daemon's round 1 warms up and runs GRPO without measuring the warmed-up policy: its
    candidate − live change is the training's, not GRPO's (the bench measures the warm-up)."""
    from ops.yardstick_history import build_history

    def runs(passed: list[bool], policy: str) -> list[SimpleNamespace]:
        return [SimpleNamespace(**vars(run(f"t{i}", p)), policy=policy) for i, p in enumerate(passed)]

    base, warm, cand = [False] * 4, [True, True, False, False], [True, True, True, False]
    unmeasured = {1: {"live": runs(base, "base"), "candidate": runs(cand, "c")}}
    [daemon_round] = build_history(unmeasured, warmed_up={1})
    assert daemon_round.grpo_change is None
    assert daemon_round.training_change is not None and daemon_round.training_change.gained == 3
    measured = {1: {**unmeasured[1], "warmup": runs(warm, "w")}}
    [bench_round] = build_history(measured, warmed_up={1})
    assert bench_round.warmup_change is not None and bench_round.warmup_change.gained == 2
    assert bench_round.grpo_change is not None and bench_round.grpo_change.gained == 1
    [grpo_only] = build_history(unmeasured)  # no warm-up: the candidate's change is GRPO's
    assert grpo_only.grpo_change is not None and grpo_only.grpo_change.gained == 3


def test_every_yardstick_task_runs_under_caps_its_reference_fits() -> None:
    import json

    from arena.episode.parser import call_block
    from arena.episode.runner import EpisodeConfig
    from arena.tasks.model import Task
    from ops.phases.yardstick import by_budget, token_budget, turn_budget, with_budget
    from simulate.local import LocalChatModel
    from trainer.config import TrainerConfig

    def task(calls: list[tuple[str, dict]]) -> Task:
        return Task.model_validate(
            {
                "id": f"t{len(calls)}-{len(str(calls))}",
                "env": "calendar",
                "instruction": "do it",
                "reference": [{"name": n, "arguments": a} for n, a in calls],
                "checks": [{"kind": "answer", "contains": ["x"]}],
            }
        )

    long_call = (
        "create_event",
        {
            "title": "Backend Engineer interview loop",
            "start": "2025-06-19T11:00:00",
            "end": "2025-06-19T15:16:00",
            "attendee_emails": ["priya.natarajan@northwind.io", "samantha.lee@northwind.io"],
            "location": "RM-AURORA",
        },
    )
    short = task([("get_event", {"event_id": "EVT-1015"})])
    hard = task([("get_event", {"event_id": "EVT-1015"})] * 4 + [long_call])
    # The real tokenizer of the embedded policy: the long call does not fit 64 tokens, and its budget holds it.
    tokenizer = LocalChatModel.load("embedded").tokenizer
    text = call_block(long_call[0], json.dumps(long_call[1], ensure_ascii=False))
    assert len(tokenizer.encode(text)) > 64
    assert token_budget(hard, 64) >= len(tokenizer.encode(text)) and token_budget(hard, 64) % 32 == 0
    assert token_budget(short, 64) == 64 and turn_budget(short, 4) == 4
    # Five calls and an answer need six turns; the cap gives one to spare.
    assert turn_budget(hard, 4) == 7
    groups = by_budget([short, hard, short], 4, 64)
    assert [(k, len(v)) for k, v in groups] == [((4, 64), 2), ((7, token_budget(hard, 64)), 1)]
    conf = TrainerConfig(episode=EpisodeConfig(max_turns=4, max_tokens_per_turn=64, max_total_tokens=4352))
    wider = with_budget(conf, 7, 128).episode
    assert (wider.max_turns, wider.max_tokens_per_turn) == (7, 128)
    assert wider.max_total_tokens == 4352 + 7 * 128 - 4 * 64


@pytest.mark.anyio
@pytest.mark.parametrize("caps", ["fit", "round"])
async def test_yardstick_caps_decide_whether_a_task_longer_than_the_rounds_cap_can_pass(
    make_config, caps: str
) -> None:
    from ops.phases import yardstick
    from ops.phases.runtime import load_envs

    # One turn a round: even a one-call task (a call, then the answer) does not fit it.
    config = make_config(**{**SMALL, "ARENA_ROUND__MAX_TURNS": "1", "ARENA_ROUND__YARDSTICK_CAPS": caps})
    async with Store(config.database_url) as store:
        await store.migrate()
        policy = _fakes().ScriptedReferencePolicy([])
        ctx = context(config, store, policy)
        envs = load_envs(ctx)
        tasks, levels = await yardstick.ensure_drawn(ctx, envs, ["banking"], None)
        policy.by_instruction = {t.instruction: t for t in tasks}
        out = await yardstick.measure(ctx, envs, tasks, levels, stage="live", policy="base", pool=None)
        async with store.transaction() as s:
            finishes = {r.finish for r in await repo_yardstick.runs(s, 1, "live")}
    assert tasks and out["overall"]["n"] == len(tasks)
    if caps == "fit":  # each task gets its calls plus two turns: the perfect episode passes
        assert out["overall"]["passed"] == len(tasks)
    else:  # the round's single turn cuts every perfect episode short
        assert out["overall"]["passed"] == 0 and finishes == {"max_turns"}
