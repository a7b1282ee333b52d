"""`arena bench learn`: bad options fail with one clear line, before any training starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from ops.cli import main
from trainer.learn_bench import LearnBenchConfig, default_trainer_config, load_task_sets
from trainer.learn_tasks import is_eval_task


def test_unknown_held_out_env_is_a_clear_error(
    capsys: pytest.CaptureFixture[str], embedded_model_path: Path
) -> None:
    code = main(["bench", "learn", "--json", "--model", str(embedded_model_path), "--eval-envs", "atlantis"])
    assert code == 2
    err = capsys.readouterr().err
    assert "arena: error: unknown evaluation environment(s): atlantis" in err
    assert "Traceback" not in err


def test_bad_step_count_is_a_clear_error(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["bench", "learn", "--model", str(tmp_path), "--grpo-steps", "1"]) == 2
    assert "is not a model folder" in capsys.readouterr().err


def test_task_sets_keep_training_and_evaluation_environments_apart() -> None:
    from arena.env.registry import Registry

    registry = Registry()
    config = LearnBenchConfig(
        eval_envs=["library", "email"], max_train_tasks=12, trainer=default_trainer_config(True)
    )
    envs, train, held, train_names = load_task_sets(config, registry)
    assert {t.env for t in held} == {"library", "email"}
    assert not {t.env for t in train} & {"library", "email"}
    assert len(train) == 12 and set(train_names) == {t.env for t in train}
    assert len({t.env for t in train}) >= 6  # the subset is spread over the training environments
    assert all(len(t.reference) >= 2 and is_eval_task(t, envs[t.env]) for t in held)
    writes = {name: set(env.write_tools) for name, env in envs.items()}
    assert all(any(c.name in writes[t.env] for c in t.reference) for t in held)
    with pytest.raises(ValueError, match="both trained on and held out"):
        load_task_sets(config.model_copy(update={"train_envs": ["library"]}), registry)


def test_train_command_rejects_unknown_tasks(
    capsys: pytest.CaptureFixture[str], embedded_model_path: Path
) -> None:
    args = ["train", "--policy", str(embedded_model_path), "--out", "unused"]
    assert main([*args, "atlantis"]) == 2
    assert "unknown environment 'atlantis'" in capsys.readouterr().err
    assert main([*args, "library/no-such-task"]) == 2
    assert "no trainable task matches 'library/no-such-task'" in capsys.readouterr().err


def test_synthesized_tasks_come_from_the_given_envs_only() -> None:
    import anyio

    from arena.env.registry import Registry
    from trainer.learn_tasks import synthesized_tasks

    config = LearnBenchConfig(eval_envs=["library"], trainer=default_trainer_config(True))
    envs, _train, _held, train_names = load_task_sets(config, Registry())
    tasks = anyio.run(synthesized_tasks, envs, train_names[:2], 3)
    assert len(tasks) == 6 and {t.env for t in tasks} == set(train_names[:2])
    for t in tasks:  # two or three calls with a write: the shape of the held-out evaluation tasks
        assert len(t.reference) in (2, 3) and is_eval_task(t, envs[t.env]), t.reference
    assert any(len(t.reference) == 3 for t in tasks)


def test_out_of_range_numbers_are_clear_errors(
    capsys: pytest.CaptureFixture[str], embedded_model_path: Path
) -> None:
    assert main(["bench", "learn", "--model", str(embedded_model_path), "--synth-tasks", "-1"]) == 2
    assert "--synth-tasks must be 0 or more" in capsys.readouterr().err
    assert main(["bench", "learn", "--model", str(embedded_model_path), "--grpo-synth-tasks", "-2"]) == 2
    assert "--grpo-synth-tasks must be 0 or more" in capsys.readouterr().err
    assert main(["bench", "learn", "--model", str(embedded_model_path), "--grpo-temperature", "0"]) == 2
    assert "--grpo-temperature must be above 0" in capsys.readouterr().err
    assert main(["bench", "learn", "--model", str(embedded_model_path), "--grpo-lr", "0"]) == 2
    assert "--grpo-lr: input should be greater than 0 (got 0.0)" in capsys.readouterr().err
    assert main(["bench", "learn", "--model", str(embedded_model_path), "--grpo-kl-beta", "-0.1"]) == 2
    assert "--grpo-kl-beta: input should be greater than or equal to 0 (got -0.1)" in capsys.readouterr().err
    assert main(["bench", "learn", "--model", str(embedded_model_path), "--grpo-tasks-per-step", "0"]) == 2
    assert (
        "--grpo-tasks-per-step: input should be greater than or equal to 1 (got 0)" in capsys.readouterr().err
    )
    assert main(["bench", "learn", "--model", str(embedded_model_path), "--grpo-iterations", "0"]) == 2
    assert "--grpo-iterations: input should be greater than or equal to 1 (got 0)" in capsys.readouterr().err
    assert main(["bench", "learn", "--model", str(embedded_model_path), "--sft-lr", "2"]) == 2
    assert "--sft-lr: input should be less than or equal to 1 (got 2.0)" in capsys.readouterr().err
    assert main(["bench", "learn", "--model", str(embedded_model_path), "--grpo-steps", "0"]) == 2
    assert "--grpo-steps: input should be greater than or equal to 1 (got 0)" in capsys.readouterr().err
    # Every bad flag is named at once, not only the first.
    assert (
        main(
            [
                "bench",
                "learn",
                "--model",
                str(embedded_model_path),
                "--grpo-tasks-per-step",
                "3",
                "--grpo-iterations",
                "0",
                "--sft-epochs",
                "-1",
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert "--grpo-iterations:" in err and "--sft-epochs: input should be greater than 0" in err


def test_every_held_out_reference_trajectory_fits_the_sequence_budget(embedded_model_path: Path) -> None:
    """A task whose perfect episode exceeds the budget could never pass: the bench must not hold one.

    Run on an event loop of its own: in the full suite an HTTP client another test leaked was closed
    on this test's loop and failed it ("Event loop is closed"); alone it always passed.
    """
    import anyio

    anyio.run(_every_held_out_reference_trajectory_fits, embedded_model_path)


async def _every_held_out_reference_trajectory_fits(embedded_model_path: Path) -> None:
    from transformers import AutoTokenizer

    from arena.env.registry import Registry
    from trainer.learn_bench import DEFAULT_EVAL_SYNTH_PER_ENV
    from trainer.learn_tasks import perfect_episode_tokens, synthesized_tasks, within_budget
    from trainer.tasks import prepare_tasks

    trainer = default_trainer_config(False)
    config = LearnBenchConfig(trainer=trainer)
    envs, _train, held, _names = load_task_sets(config, Registry())
    prepared, skipped = await prepare_tasks(
        held, envs, system_prompt=trainer.system_prompt, tool_subset=trainer.tool_subset
    )
    assert not skipped and len(prepared) >= 30
    tokenizer = AutoTokenizer.from_pretrained(embedded_model_path)
    lengths: dict[str, int] = {}
    for item in prepared:
        length = await perfect_episode_tokens(item, tokenizer, trainer)
        assert length is not None, item.key
        lengths[item.key] = length
    budget = trainer.episode.max_total_tokens
    too_long = {k: n for k, n in lengths.items() if n >= budget}
    assert not too_long, f"reference trajectories at or over the {budget}-token budget: {too_long}"
    assert trainer.sft.max_length >= max(lengths.values())

    # Synthesized evaluation tasks are filtered by the same measure (some email walks list long
    # messages); what the bench keeps fits.
    synthesized, _ = await prepare_tasks(
        await synthesized_tasks(envs, config.eval_envs, DEFAULT_EVAL_SYNTH_PER_ENV),
        envs,
        system_prompt=trainer.system_prompt,
        tool_subset=trainer.tool_subset,
    )
    kept, dropped = await within_budget(synthesized, embedded_model_path, trainer)
    assert len(kept) + len(dropped) == len(synthesized) and len(kept) >= 2 * DEFAULT_EVAL_SYNTH_PER_ENV
    assert all("tokens, the budget 3584" in d for d in dropped)
    for item in kept:
        length = await perfect_episode_tokens(item, tokenizer, trainer)
        assert length is not None and length < budget


@pytest.mark.anyio
async def test_fresh_grpo_tasks_repeat_no_warm_up_task(embedded_model_path: Path) -> None:
    """GRPO's own tasks (another seed) never share reference calls with a warm-up task."""
    from arena.env.registry import Registry
    from arena.synth.filters import reference_key
    from trainer.learn_bench import GRPO_SYNTH_SEED
    from trainer.learn_tasks import fitting_synthesized_tasks

    trainer = default_trainer_config(False)
    config = LearnBenchConfig(eval_envs=["library"], trainer=trainer)
    envs, _train, _held, train_names = load_task_sets(config, Registry())
    names = ["banking", "shop_orders"]
    assert set(names) <= set(train_names)
    warm_up, _ = await fitting_synthesized_tasks(envs, names, 4, embedded_model_path, trainer)
    assert warm_up
    # The same seed again: every task repeats one of the warm-up's, so none is fresh.
    again, left_out = await fitting_synthesized_tasks(
        envs, names, 4, embedded_model_path, trainer, exclude=warm_up
    )
    assert again == [] and len(left_out) >= len(warm_up)
    assert all("same reference calls as a warm-up task" in line for line in left_out[-len(warm_up) :])
    fresh, _ = await fitting_synthesized_tasks(
        envs, names, 4, embedded_model_path, trainer, seed=GRPO_SYNTH_SEED, exclude=warm_up
    )
    assert fresh and {t.env for t in fresh} <= set(names)
    assert not {reference_key(t) for t in fresh} & {reference_key(t) for t in warm_up}
    assert not {t.full_id for t in fresh} & {t.full_id for t in warm_up}
