"""The phases' small pure parts: gate accounting, trainer settings, task difficulty, arena picking."""

from __future__ import annotations

from arena.synth.cost import SynthesisReport
from ops.metrics import Metrics
from ops.phases.base import PhaseContext
from ops.phases.plan import task_difficulty, training_outcomes
from ops.phases.runtime import record_synthesis, trainer_config
from ops.phases.tasks import pick


def context(config, metrics: Metrics | None = None) -> PhaseContext:
    async def safe_point() -> None:
        return None

    return PhaseContext(
        round=3,
        phase="synthesize",
        config=config,
        store=None,  # type: ignore[arg-type]
        metrics=metrics or Metrics(),
        models=None,  # type: ignore[arg-type]
        previous={},
        _safe_point=safe_point,
        _progress=lambda done, total, note: None,
    )


def sample(metrics: Metrics, name: str, **labels: str) -> float:
    value = metrics.registry.get_sample_value(name, labels)
    return 0.0 if value is None else value


def test_gate_acceptance_counts_tasks_that_reached_and_passed_each_gate(make_config) -> None:
    metrics = Metrics()
    ctx = context(make_config(), metrics)
    report = SynthesisReport(env="food_delivery", kind="graph", requested=3, kept=2)
    report.rejections = {"walk": 4, "duplicate": 1, "gold": 2, "empty": 1}
    summary = record_synthesis(ctx, report, "graph")
    assert summary["kept"] == 2 and summary["rejections"]["gold"] == 2
    gate = "arena_synthesis_gate_total"
    # empty: the 2 kept passed it, 1 was rejected; gold: 3 passed (kept + rejected later), 2 rejected.
    assert sample(metrics, gate, gate="empty", result="accepted") == 2
    assert sample(metrics, gate, gate="empty", result="rejected") == 1
    assert sample(metrics, gate, gate="gold", result="accepted") == 3
    assert sample(metrics, gate, gate="gold", result="rejected") == 2
    assert sample(metrics, gate, gate="stability", result="accepted") == 5
    assert sample(metrics, gate, gate="duplicate", result="accepted") == 5
    assert sample(metrics, gate, gate="duplicate", result="rejected") == 1
    # Walk failures happen before any gate: they are not gate rejections.
    assert sample(metrics, gate, gate="walk", result="rejected") == 0
    assert sample(metrics, "arena_tasks_synthesized_total", origin="graph") == 2


def test_trainer_config_follows_round_and_trainer_sections(make_config) -> None:
    config = make_config(
        ARENA_ROUND__SAMPLES_PER_TASK="2",
        ARENA_ROUND__TRAIN_STEPS="3",
        ARENA_ROUND__MAX_TURNS="4",
        ARENA_ROUND__MAX_TOKENS_PER_TURN="64",
        ARENA_ROUND__CONSTRAIN_TOOL_CALLS="true",
        ARENA_TRAINER__BATCH_SIZE="8",
        ARENA_TRAINER__SYSTEM_PROMPT="compact",
        ARENA_TRAINER__TOOL_SUBSET="0",
        ARENA_TRAINER__USE_LORA="true",
        ARENA_TRAINER__DYNAMIC_SAMPLING_PASSES="3",
    )
    ctx = context(config)
    train = trainer_config(ctx)
    assert (train.group_size, train.tasks_per_step, train.max_steps) == (2, 4, 3)
    assert train.episode.max_turns == 4 and train.episode.params.max_tokens == 64
    assert train.episode.params.temperature == 1.0 and train.episode.params.logprobs
    assert train.system_prompt == "compact" and train.tool_subset == 0 and train.lora.enabled
    assert train.save_every == 3  # one checkpoint per round, at its last step
    assert train.dynamic_sampling_passes == 3
    evaluation = trainer_config(ctx, temperature=0.0)
    assert evaluation.episode.params.temperature == 0.0 and not evaluation.episode.params.logprobs
    assert evaluation.system_prompt == train.system_prompt and evaluation.tool_subset == train.tool_subset
    assert train.episode.params.constrain_tool_calls and evaluation.episode.params.constrain_tool_calls


def test_task_difficulty_reads_only_curriculum_knobs() -> None:
    d = task_difficulty({"difficulty": {"walk_length": 3, "distractors": 1, "seed": 7, "tool_subset": "a,b"}})
    assert d.walk_length == 3 and d.distractors == 1
    assert task_difficulty({}).as_dict() == task_difficulty({"difficulty": {"bogus": 1}}).as_dict()


def test_last_rounds_training_rollouts_become_curriculum_outcomes() -> None:
    train_output = {
        "grpo": {
            "task_outcomes": [
                {"task": "hotels/g-1", "env": "hotels", "episodes": 4, "passed": 1, "reward_sum": 1.5},
                {"task": "banking/g-2", "env": "banking", "episodes": 2, "passed": 2, "reward_sum": 2.0},
            ]
        }
    }
    tasks = {"hotels/g-1": {"difficulty": {"walk_length": 3}}}
    outcomes = training_outcomes(train_output, tasks)
    assert [(o.env, o.passed) for o in outcomes] == [("hotels", True)] + [("hotels", False)] * 3 + [
        ("banking", True)
    ] * 2
    assert outcomes[0].difficulty.walk_length == 3
    assert training_outcomes({"skipped": "no training tasks", "steps": 0}, {}) == []


def test_pick_is_seeded_and_puts_the_preferred_group_first() -> None:
    names = ["a", "b", "c", "d", "e"]
    first = pick(names, 3, seed=5, key=lambda n: n in ("d", "e"))
    assert first == pick(list(reversed(names)), 3, seed=5, key=lambda n: n in ("d", "e"))
    assert set(first) <= {"a", "b", "c"}
    assert sorted(pick(names, None, seed=1)) == names
