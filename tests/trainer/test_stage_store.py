"""The learning benchmark's stage records: tied to the weights, atomic, and reused on a rerun."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

import pytest

import trainer.learn_stage as learn_stage
from trainer.evaluate import EpisodeScore, EvalReport, summarize
from trainer.learn_bench import LearnBenchConfig, default_trainer_config
from trainer.metrics import TrainResult
from trainer.stage_store import StageRecord, StageStore, evaluation_key, weights_signature


def _policy(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "model.safetensors").write_bytes(b"weights")
    return folder


def _report(passed: bool) -> EvalReport:
    episode = EpisodeScore(
        task="library/t",
        env="library",
        sample=0,
        reward=float(passed),
        passed=passed,
        turns=2,
        calls=1,
        finish="answered",
    )
    summary = summarize([episode])
    return EvalReport(overall=summary, per_env={"library": summary}, episodes=[episode], seconds=3.0)


def test_a_record_is_reused_only_for_the_same_weights(tmp_path: Path) -> None:
    policy = _policy(tmp_path / "policy")
    store = StageStore(tmp_path / "stages")
    record = StageRecord(
        stage="sft", policy=str(policy), weights=weights_signature(policy), train_seconds=12.5, train_steps=3
    )
    record.eval, record.eval_key = _report(True), "k"
    store.save(record)
    assert store.load("sft", policy) == record
    assert store.load("grpo", policy) is None
    assert store.load("sft", _policy(tmp_path / "other")) is None  # another checkpoint folder

    stat = (policy / "model.safetensors").stat()
    os.utime(policy / "model.safetensors", ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    assert store.load("sft", policy) is None  # retrained in place: the record no longer applies
    with pytest.raises(ValueError, match=r"no \.safetensors"):
        weights_signature(tmp_path / "stages")


def test_an_unreadable_record_counts_as_absent(tmp_path: Path) -> None:
    policy = _policy(tmp_path / "policy")
    store = StageStore(tmp_path / "stages")
    store.save(StageRecord(stage="base", policy=str(policy), weights=weights_signature(policy)))
    (tmp_path / "stages" / "base.json").write_text('{"stage": "base", "policy": ')  # cut mid-write
    assert store.load("base", policy) is None
    assert not list((tmp_path / "stages").glob("*.tmp"))


def test_evaluation_key_depends_on_tasks_and_settings_not_their_order() -> None:
    key = evaluation_key(["a", "b"], {"samples": 1})
    assert key == evaluation_key(["b", "a"], {"samples": 1})
    assert key != evaluation_key(["a"], {"samples": 1})
    assert key != evaluation_key(["a", "b"], {"samples": 2})


@pytest.mark.anyio
async def test_a_rerun_reuses_finished_evaluations_and_training_figures(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Control flow only: the evaluation is a scripted stand-in that counts its calls."""
    calls: list[Path] = []

    async def scripted_evaluate_dir(policy_dir: Path, prepared: list, config: LearnBenchConfig) -> EvalReport:
        calls.append(policy_dir)
        return _report(len(calls) % 2 == 1)

    monkeypatch.setattr(learn_stage, "evaluate_dir", scripted_evaluate_dir)
    policy = _policy(tmp_path / "sft" / "checkpoints" / "step-3")
    store = StageStore(tmp_path / "stages")
    config = LearnBenchConfig(eval_envs=["library"], trainer=default_trainer_config(True))
    tasks = [SimpleNamespace(key="library/t", fingerprint="library/t@1")]
    trained = TrainResult(round_id=0, phase="sft", policy_dir=policy, steps=3, seconds=40.0)
    first = await learn_stage.run_stage(
        "sft", policy, trained, tasks, config, store, print, train_peak_rss_mb=900
    )
    assert len(calls) == 1 and first.train_seconds == 40.0 and first.eval is not None
    assert first.report().train_peak_rss_mb == 900

    # The killed run's rerun: training returns the finished checkpoint at once (no step taken).
    resumed = trained.model_copy(update={"steps": 0, "seconds": 0.1})
    reused: dict[str, float] = {}
    again = await learn_stage.run_stage("sft", policy, resumed, tasks, config, store, print, reused=reused)
    assert len(calls) == 1, "a finished evaluation of the same weights is not run again"
    assert again.report() == first.report()  # training figures of the run that trained
    # The reused work's time is reported, so a resumed run is not judged on its own wall time.
    assert reused == {"sft training": 40.0, "sft evaluation": 3.0}

    # Other evaluation settings: the same weights are evaluated again, training figures kept.
    config2 = config.model_copy(update={"eval_samples": 2})
    reused.clear()
    third = await learn_stage.run_stage("sft", policy, resumed, tasks, config2, store, print, reused=reused)
    assert reused == {"sft training": 40.0}
    assert len(calls) == 2 and third.train_seconds == 40.0 and third.train_peak_rss_mb == 900
    assert third.eval is not None and third.eval.overall.pass_rate.value == 0.0

    # An edited task (a check, the prompt or a tool description): evaluated again as well.
    edited = [SimpleNamespace(key="library/t", fingerprint="library/t@2")]
    await learn_stage.run_stage("sft", policy, resumed, edited, config2, store, print)
    assert len(calls) == 3


@pytest.mark.anyio
async def test_a_round_resumed_mid_way_counts_the_time_before_the_resume(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Control flow only: the evaluation is a scripted stand-in."""

    async def scripted_evaluate_dir(policy_dir: Path, prepared: list, config: LearnBenchConfig) -> EvalReport:
        return _report(True)

    monkeypatch.setattr(learn_stage, "evaluate_dir", scripted_evaluate_dir)
    policy = _policy(tmp_path / "grpo" / "checkpoints" / "step-9")
    store = StageStore(tmp_path / "stages")
    config = LearnBenchConfig(eval_envs=["library"], trainer=default_trainer_config(True))
    tasks = [SimpleNamespace(key="library/t", fingerprint="library/t@1")]
    # Killed after step 4 (its lineage said 600 s), resumed for steps 5–9 in 700 s.
    resumed = TrainResult(
        round_id=1,
        phase="grpo",
        policy_dir=policy,
        steps=5,
        resumed_from_step=4,
        total_steps=9,
        seconds=700.0,
        prior_seconds=600.0,
        groups=18,
        zero_variance_groups=4,
        resampled_groups=3,
    )
    reused: dict[str, float] = {}
    record = await learn_stage.run_stage("grpo", policy, resumed, tasks, config, store, print, reused=reused)
    assert (record.train_seconds, record.train_steps) == (1300.0, 9)
    assert reused == {"grpo training before the resume": 600.0}
    # The --json report carries the GRPO group figures, not only the human-readable note.
    reported = record.report().model_dump()
    assert (reported["groups"], reported["zero_variance_groups"], reported["resampled_groups"]) == (18, 4, 3)


@pytest.mark.anyio
async def test_a_task_fingerprint_changes_with_what_the_policy_sees_and_is_checked_by() -> None:
    from arena.env.registry import Registry
    from arena.tasks.model import AnswerCheck
    from arena.tasks.toml_io import load_tasks
    from trainer.tasks import prepare_tasks

    env = Registry().get("library")
    task = next(
        t for t in load_tasks(env.path, env.name, tools=env.tools) if t.id == "hold-fourth-wing-home-branch"
    )
    edited = task.model_copy(update={"checks": [*task.checks[:-1], AnswerCheck(contains=["3"])]})
    renamed = edited.model_copy(update={"id": "renamed"})

    async def fingerprints(tasks: list, **view: object) -> list[str]:
        prepared, _ = await prepare_tasks(tasks, {"library": env}, **view)
        return [p.fingerprint for p in prepared]

    [plain], [other_check] = await fingerprints([task]), await fingerprints([edited])
    assert plain.startswith("library/hold-fourth-wing-home-branch@") and plain != other_check
    assert await fingerprints([task.model_copy()]) == [plain]  # deterministic
    assert (await fingerprints([task], system_prompt="compact"))[0] != plain
    assert (await fingerprints([task], tool_subset=0))[0] != plain
    assert (await fingerprints([renamed]))[0].startswith("library/renamed@")
