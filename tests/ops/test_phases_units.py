"""The phases' small pure parts: gate accounting, trainer settings, task difficulty, arena picking."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from arena.synth.cost import SynthesisReport
from ops.metrics import Metrics
from ops.phases.base import read_output
from ops.phases.outputs import TrainOutput
from ops.phases.plan import task_difficulty, training_outcomes
from ops.phases.publish import PublishPhase
from ops.phases.runtime import http_publisher, prune_round_dirs, record_synthesis, trainer_config
from ops.phases.tasks import pick


def sample(metrics: Metrics, name: str, **labels: str) -> float:
    value = metrics.registry.get_sample_value(name, labels)
    return 0.0 if value is None else value


def test_gate_acceptance_counts_tasks_that_reached_and_passed_each_gate(phase_context, make_config) -> None:
    metrics = Metrics()
    ctx = phase_context(make_config(), round_no=3, phase="synthesize", metrics=metrics)
    report = SynthesisReport(env="food_delivery", kind="graph", requested=3, kept=2)
    report.rejections = {"walk": 4, "duplicate": 1, "gold": 2, "adversary": 1}
    report.adversaries = {"empty": {"held": 3}, "reads_only": {"held": 2, "paid": 1}}
    summary = record_synthesis(ctx, report, "graph")
    assert summary["kept"] == 2 and summary["rejections"]["gold"] == 2
    gate = "arena_synthesis_gate_total"
    # adversary: the 2 kept passed it, 1 was rejected; gold: 3 passed (kept + rejected later), 2 rejected.
    assert sample(metrics, gate, gate="adversary", result="accepted") == 2
    assert sample(metrics, gate, gate="adversary", result="rejected") == 1
    # Per non-working agent: the tasks it earned nothing on, and those it was paid on.
    assert sample(metrics, gate, gate="adversary_empty", result="accepted") == 3
    assert sample(metrics, gate, gate="adversary_reads_only", result="rejected") == 1
    assert summary["adversaries"]["reads_only"] == {"held": 2, "paid": 1}
    assert sample(metrics, gate, gate="gold", result="accepted") == 3
    assert sample(metrics, gate, gate="gold", result="rejected") == 2
    assert sample(metrics, gate, gate="stability", result="accepted") == 5
    assert sample(metrics, gate, gate="duplicate", result="accepted") == 5
    assert sample(metrics, gate, gate="duplicate", result="rejected") == 1
    # Walk failures happen before any gate: they are not gate rejections.
    assert sample(metrics, gate, gate="walk", result="rejected") == 0
    assert sample(metrics, "arena_tasks_synthesized_total", origin="graph") == 2


def test_trainer_config_follows_round_and_trainer_sections(phase_context, make_config) -> None:
    config = make_config(
        ARENA_ROUND__SAMPLES_PER_TASK="2",
        ARENA_ROUND__TRAIN_STEPS="3",
        ARENA_ROUND__MAX_TURNS="4",
        ARENA_ROUND__MAX_TOKENS_PER_TURN="64",
        ARENA_ROUND__CONSTRAIN_TOOL_CALLS="true",
        ARENA_TRAINER__TASKS_PER_STEP="4",
        ARENA_TRAINER__SYSTEM_PROMPT="compact",
        ARENA_TRAINER__TOOL_SUBSET="0",
        ARENA_TRAINER__LORA__ENABLED="true",
        ARENA_TRAINER__DYNAMIC_SAMPLING_PASSES="3",
        ARENA_TRAINER__SFT__EPOCHS="1.5",
        ARENA_TRAINER__SFT__LEARNING_RATE="3e-4",
    )
    ctx = phase_context(config, round_no=3, phase="synthesize")
    train = trainer_config(ctx.config, ctx.round)
    assert (train.group_size, train.tasks_per_step, train.max_steps) == (2, 4, 3)
    assert (train.sft.epochs, train.sft.learning_rate) == (1.5, 3e-4)
    assert train.sft.max_length == train.episode.max_total_tokens  # the warm-up imitates what fits
    assert train.episode.max_turns == 4 and train.episode.params.max_tokens == 64
    assert train.episode.params.temperature == 1.0 and train.episode.params.logprobs
    assert train.system_prompt == "compact" and train.tool_subset == 0 and train.lora.enabled
    assert train.save_every == 3  # one checkpoint per round, at its last step
    assert train.dynamic_sampling_passes == 3
    evaluation = trainer_config(ctx.config, ctx.round, temperature=0.0)
    assert evaluation.episode.params.temperature == 0.0 and not evaluation.episode.params.logprobs
    assert evaluation.system_prompt == train.system_prompt and evaluation.tool_subset == train.tool_subset
    assert train.episode.params.constrain_tool_calls and evaluation.episode.params.constrain_tool_calls


def test_rollouts_from_the_policy_server_sample_from_it_and_publish_to_it(
    phase_context, make_config, tmp_path
) -> None:
    config = make_config(
        ARENA_MODELS__POLICY__BACKEND="http",
        ARENA_MODELS__POLICY__BASE_URL="http://vllm:8000/v1",
        ARENA_MODELS__POLICY__MODEL="qwen-8b",
        ARENA_MODELS__POLICY__API_KEY="s3cret",
        ARENA_TRAINER__PUBLISH_DIR=str(tmp_path / "shared"),
        ARENA_TRAINER__BASE_MODEL=str(tmp_path / "qwen-8b"),
    )
    assert trainer_config(config, 3).rollout_backend == "local"  # the default: the trainer's model
    config.trainer.rollout_backend = "http"
    train = trainer_config(config, 3)
    assert (train.rollout_backend, train.rollout_base_url) == ("http", "http://vllm:8000/v1")
    assert (train.rollout_model, train.rollout_api_key) == ("qwen-8b", "s3cret")
    publisher = http_publisher(phase_context(config, round_no=3, phase="synthesize"))
    assert publisher.base_url == "http://vllm:8000" and publisher.shared_dir == tmp_path / "shared"


def test_task_difficulty_reads_only_curriculum_knobs() -> None:
    d = task_difficulty({"difficulty": {"walk_length": 3, "distractors": 1, "seed": 7, "tool_subset": "a,b"}})
    assert d.walk_length == 3 and d.distractors == 1
    assert task_difficulty({}).as_dict() == task_difficulty({"difficulty": {"bogus": 1}}).as_dict()


def test_last_rounds_training_rollouts_become_curriculum_outcomes() -> None:
    stored = {
        "checkpoint": "/data/checkpoints/round-0001/grpo",
        "steps": 2,
        "grpo": {
            "total_steps": 2,
            "task_outcomes": [
                {"task": "hotels/g-1", "env": "hotels", "episodes": 4, "passed": 1, "reward_sum": 1.5},
                {"task": "banking/g-2", "env": "banking", "episodes": 2, "passed": 2, "reward_sum": 2.0},
            ],
        },
    }
    tasks = {"hotels/g-1": {"difficulty": {"walk_length": 3}}}
    outcomes = training_outcomes(read_output(TrainOutput, stored, 1), tasks)
    assert [(o.env, o.passed) for o in outcomes] == [("hotels", True)] + [("hotels", False)] * 3 + [
        ("banking", True)
    ] * 2
    assert outcomes[0].difficulty.walk_length == 3
    skipped = {"skipped": "no training tasks", "steps": 0, "checkpoint": None}
    assert training_outcomes(read_output(TrainOutput, skipped, 1), {}) == []
    assert training_outcomes(None, {}) == []  # no TRAIN in the round before


def test_pick_is_seeded_and_puts_the_preferred_group_first() -> None:
    names = ["a", "b", "c", "d", "e"]
    first = pick(names, 3, seed=5, key=lambda n: n in ("d", "e"))
    assert first == pick(list(reversed(names)), 3, seed=5, key=lambda n: n in ("d", "e"))
    assert set(first) <= {"a", "b", "c"}
    assert sorted(pick(names, None, seed=1)) == names


def test_round_folders_past_the_newest_are_deleted_unless_they_hold_a_protected_policy(tmp_path) -> None:
    root = tmp_path / "checkpoints"
    for number in (1, 2, 3, 9, 10, 12345):  # numbers, not names, order them (round-12345 is newest)
        (root / f"round-{number:04d}" / "grpo" / "checkpoints" / "step-000004").mkdir(parents=True)
    (root / "round-0004").write_text("a file, not a round folder")
    (root / "round-notes").mkdir()
    live = root / "round-12345" / "grpo" / "checkpoints" / "step-000004"
    parent = (
        root / "round-0002" / "grpo" / "checkpoints" / "step-000004"
    )  # trained from (rounds 3-10 kept none)
    deleted = prune_round_dirs(root, 2, [live, parent])
    assert sorted(p.name for p in deleted) == ["round-0001", "round-0003", "round-0009"]
    assert sorted(p.name for p in root.iterdir()) == [
        "round-0002",
        "round-0004",
        "round-0010",
        "round-12345",
        "round-notes",
    ]
    assert prune_round_dirs(root, 2, [live, parent]) == []  # idempotent: a rerun after a crash


@pytest.mark.anyio
async def test_publishing_a_round_deletes_the_round_folders_past_keep_rounds(
    phase_context, make_config
) -> None:
    # No yardstick here (no store): the gate, tested in test_yardstick.py, is off.
    config = make_config(ARENA_TRAINER__KEEP_ROUNDS="2", ARENA_TRAINER__PUBLISH_GATE="false")
    root = config.data.dir / "checkpoints"
    for number in (1, 2, 3):
        folder = root / f"round-{number:04d}" / "grpo" / "checkpoints" / "step-000002"
        folder.mkdir(parents=True)
        (folder / "model.safetensors").write_bytes(b"weights")
    loaded: list[Path] = []
    policy = SimpleNamespace(load_weights=loaded.append)  # scripted local policy model: records loads

    async def load_policy() -> SimpleNamespace:
        return policy

    ctx = phase_context(config, round_no=3, phase="synthesize")
    ctx.models = SimpleNamespace(policy=load_policy, policy_weights=None)  # type: ignore[assignment]
    live = root / "round-0003" / "grpo" / "checkpoints" / "step-000002"
    trained = TrainOutput(checkpoint=str(live), parent_dir=str(root / "round-0001"), steps=2)
    out = await PublishPhase().run(ctx.with_outputs(trained))
    assert out["policy"] == "updated" and loaded == [live]
    # Keep 2 would keep rounds 2 and 3; round 1 holds the parent, so nothing goes yet.
    assert out["pruned"] == [] and len(list(root.iterdir())) == 3
    trained.parent_dir = str(root / "round-0002" / "grpo" / "checkpoints" / "step-000002")
    out = await PublishPhase().run(ctx.with_outputs(trained))
    assert out["pruned"] == ["round-0001"] and sorted(p.name for p in root.iterdir()) == [
        "round-0002",
        "round-0003",
    ]


@pytest.mark.anyio
async def test_a_published_policy_whose_folder_is_gone_stops_training_instead_of_restarting_from_base(
    phase_context,
    make_config,
) -> None:
    from arena.store import CheckpointRow, Store, repo
    from ops.phases.runtime import current_policy_dir

    config = make_config()
    live = config.data.dir / "checkpoints" / "round-0007" / "grpo" / "checkpoints" / "step-000008"
    live.mkdir(parents=True)
    async with Store(config.database_url) as store:
        await store.migrate()
        async with store.transaction() as s:
            await repo.add_checkpoint(
                s, CheckpointRow(id="round-0007", round=7, path=str(live), published=True)
            )
        ctx = phase_context(config, round_no=3, phase="synthesize")
        ctx.store = store
        assert await current_policy_dir(ctx) == (live, "round-0007")
        live.rename(live.with_name("moved-away"))
        with pytest.raises(FileNotFoundError, match=f"published policy round-0007 is missing at {live}"):
            await current_policy_dir(ctx)


@pytest.mark.anyio
async def test_evaluate_first_reloads_the_live_policy_into_a_policy_server_that_restarted(
    phase_context, make_config, tmp_path, reloadable_model
) -> None:
    """Against the real server app with vLLM's reload endpoints (`arena serve-model --allow-reload`)."""
    from arena.store import CheckpointRow, Store, repo
    from ops.phases.runtime import serve_live_policy
    from simulate.serve import create_app, serving
    from trainer.checkpoints import Lineage

    served = reloadable_model
    async with serving(create_app(served, allow_reload=True)) as url:  # type: ignore[arg-type]
        config = make_config(
            ARENA_MODELS__POLICY__BACKEND="http",
            ARENA_MODELS__POLICY__BASE_URL=url + "/v1",
            ARENA_TRAINER__BASE_MODEL=str(tmp_path / "base"),
            ARENA_TRAINER__PUBLISH_DIR=str(tmp_path / "publish"),
        )
        async with Store(config.database_url) as store:
            await store.migrate()
            ctx = phase_context(config, round_no=3, phase="synthesize")
            ctx.store = store
            assert await serve_live_policy(ctx) is None and served.loaded == []  # fresh: nothing trained yet
            live = tmp_path / "round-0007" / "step-000008"
            live.mkdir(parents=True)
            (live / "model.safetensors").write_bytes(b"weights")
            lineage = Lineage(parent=None, round_id=7, phase="grpo", step=8, total_steps=8)
            (live / "lineage.json").write_text(lineage.model_dump_json())
            async with store.transaction() as s:
                await repo.add_checkpoint(
                    s, CheckpointRow(id="round-0007", round=7, path=str(live), published=True)
                )
            assert await serve_live_policy(ctx) == live
    assert [path.name for path in served.loaded] == ["round-0007-step-000008"]
    assert (tmp_path / "publish" / "round-0007-step-000008" / "model.safetensors").read_bytes() == b"weights"


def test_without_a_sandbox_boundary_sandboxed_envs_are_refused_and_the_rest_go_on(
    phase_context, make_config, monkeypatch
) -> None:
    from ops.phases.runtime import load_envs

    monkeypatch.setenv("ARENA_SANDBOX", "all")  # every executable environment now needs the sandbox
    ctx = phase_context(make_config(), round_no=3, phase="synthesize")
    everything = load_envs(ctx)
    executable = {n for n, e in everything.items() if e.kind == "executable"}
    assert executable and all(everything[n].sandboxed for n in executable)
    ctx.sandbox_available = False
    usable = load_envs(ctx)
    assert not executable & set(usable)  # refused, never run outside the boundary
    assert set(usable) == set(everything) - executable  # simulated ones need no sandbox
    ctx.sandbox_available = True
    assert set(load_envs(ctx)) == set(everything)


@pytest.mark.anyio
async def test_a_grounded_request_rejects_references_with_ids_nobody_showed(
    phase_context, make_config
) -> None:
    """SYNTHESIZE asks for grounded training tasks (SFT imitates their references); the request
    carries the flag to the synthesizer, which then turns such candidates away."""
    from arena.difficulty import Difficulty
    from ops.phases.runtime import load_envs
    from ops.phases.synth_requests import graph_request, run_request
    from ops.phases.synth_site import SynthesisSite

    ctx = phase_context(make_config(ARENA_SYNTHESIS__MAX_ATTEMPTS="10"), phase="synthesize")
    envs = load_envs(ctx)
    vague = Difficulty(walk_length=2, ambiguity=1)
    loose = graph_request(ctx, "hotels", 6, seed=0, difficulty=vague, with_helper=False)
    grounded = graph_request(ctx, "hotels", 6, seed=0, difficulty=vague, with_helper=False, grounded=True)
    assert not loose.grounded and grounded.grounded
    outcome = await run_request(SynthesisSite.of(ctx), envs, grounded, None)
    assert len(outcome.tasks) == 6 and outcome.report.rejections.get("ungrounded", 0) > 0
    assert (await run_request(SynthesisSite.of(ctx), envs, loose, None)).report.rejections.get(
        "ungrounded", 0
    ) == 0
