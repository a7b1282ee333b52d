"""The learning benchmark's held-out figures with a tool subset say so, and come with every tool too.

`evaluate_dir` is replaced by a scripted fake that records the tool view it was given: the control
flow (which tasks, which view, which stages, reuse on a rerun) is what is checked here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from trainer.evaluate import EpisodeScore, EvalReport, summarize
from trainer.learn_bench import LearnBenchConfig, default_trainer_config, load_task_sets
from trainer.stage_store import StageStore


@pytest.mark.anyio
async def test_every_stage_is_also_evaluated_with_every_tool_and_reused_on_a_rerun(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import trainer.learn_stage as learn_stage
    from arena.env.registry import Registry

    seen: list[tuple[str, int | None, dict[str, int]]] = []

    async def scripted_evaluate_dir(policy_dir: Path, prepared: list[Any], config: Any) -> EvalReport:
        seen.append(
            (policy_dir.name, config.trainer.tool_subset, {p.key: len(p.env.tool_specs) for p in prepared})
        )
        scores = [
            EpisodeScore(
                task=p.key, env=p.task.env, sample=0, reward=1.0, passed=True, turns=1, calls=1, finish="stop"
            )
            for p in prepared
        ]
        return EvalReport(overall=summarize(scores), per_env={}, episodes=scores, seconds=0.0)

    monkeypatch.setattr(learn_stage, "evaluate_dir", scripted_evaluate_dir)
    config = LearnBenchConfig(eval_envs=["library"], max_train_tasks=2, trainer=default_trainer_config(True))
    assert config.trainer.tool_subset == 0  # the quick bench shows the reference tools only
    envs, _, held, _ = load_task_sets(config, Registry())
    policies = []
    for stage in ("base", "sft", "grpo"):
        folder = tmp_path / stage
        folder.mkdir()
        (folder / "model.safetensors").write_bytes(b"weights")
        policies.append((stage, folder))
    keep = {t.full_id for t in held[:3]}
    store = StageStore(tmp_path / "stages")
    reused: dict[str, float] = {}
    out = await learn_stage.all_tools_evaluations(
        policies, held, keep, envs, config, store, lambda _m: None, reused=reused
    )
    assert list(out) == ["base", "sft", "grpo"] and all(
        r.overall.pass_rate.value == 1.0 for r in out.values()
    )
    assert [s[0] for s in seen] == ["base", "sft", "grpo"] and {s[1] for s in seen} == {None}
    tools = len(envs["library"].tool_names)
    assert seen[0][2] == {key: tools for key in keep}  # only the kept tasks, every tool
    # A rerun into the same folder reuses the three evaluations.
    again = await learn_stage.all_tools_evaluations(
        policies, held, keep, envs, config, store, lambda _m: None, reused=reused
    )
    assert len(seen) == 3 and set(reused) == {f"{s}-all-tools evaluation" for s in ("base", "sft", "grpo")}
    assert again["grpo"].overall == out["grpo"].overall
