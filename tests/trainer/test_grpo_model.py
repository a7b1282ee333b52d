"""GRPO with the real embedded model on CPU: the loss mask of a real episode, and one real step."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from arena.episode.users import ScriptedUser
from arena.protocols import UserContext
from arena.tasks.model import AnswerCheck
from trainer.checkpoints import read_lineage
from trainer.config import LoraConfig, TrainerConfig
from trainer.grpo import train_round
from trainer.metrics import StepMetrics, TrainResult
from trainer.rollout import RolloutBridge, SampledBatch
from trainer.samples import has_signal
from work.tasks import prepare_tasks

from .tiny import assert_merged_lora_checkpoint, letters_task, tiny_config

pytestmark = [pytest.mark.model, pytest.mark.slow]

USER_LINE = "Thanks. Please tell me one more thing."


@pytest.mark.anyio
async def test_env_mask_covers_exactly_the_policy_tokens(embedded_model_path: Path) -> None:
    """A real conversational episode (the scripted user answers twice): policy turns are 1, the rest 0."""
    from simulate.local import LocalChatModel

    chat = LocalChatModel.load(embedded_model_path, device="cpu")
    task = letters_task("chat").model_copy(
        update={"mode": "conversational", "user": UserContext(intent="chat a little")}
    )
    config = tiny_config(episode=tiny_config().episode.model_copy(update={"max_turns": 3}))
    prepared, _ = await prepare_tasks([task], system_prompt="compact", tool_subset=0)
    bridge = RolloutBridge(
        prepared, config, policy_factory=lambda _t: chat, user=ScriptedUser([USER_LINE] * 4)
    )
    keys = [prepared[0].key] * 2
    results = await bridge.rollout(keys, policy=chat)
    out = bridge.build_output(SampledBatch(keys, results), pad_id=0, seconds=1.0)
    tok = chat.tokenizer
    for i, (transcript, _) in enumerate(results):
        assert transcript.num_turns >= 2, transcript.finish  # multi-turn: the user answered
        assert not transcript.chain_breaks
        chain = transcript.chains[0]
        completion, mask = out["completion_ids"][i], out["env_mask"][i]
        if sum(mask) == 0:  # the group had no reward variance and was dropped: compare unmasked
            mask = chain.mask()
        assert out["prompt_ids"][i] == chain.prompt_ids() and completion == chain.completion_ids()
        # Walk the segments: every policy token is 1, every context token 0, nothing else.
        position = 0
        for segment in chain.segments[1:]:
            span = mask[position : position + len(segment.token_ids)]
            assert span == [1 if segment.kind == "policy" else 0] * len(segment.token_ids)
            if segment.kind == "policy":
                assert tok.decode(segment.token_ids, skip_special_tokens=True).strip() in {
                    t.text.strip() for t in transcript.turns
                }
            else:
                assert "<|im_start|>" in tok.decode(segment.token_ids)
            position += len(segment.token_ids)
        assert position == len(completion)
        assert sum(mask) == sum(len(s.token_ids) for s in chain.segments if s.kind == "policy")
        context = tok.decode([t for t, m in zip(completion, mask, strict=True) if m == 0])
        assert USER_LINE in context


@pytest.mark.anyio
async def test_dynamic_sampling_swaps_a_flat_group_for_one_with_signal(embedded_model_path: Path) -> None:
    """Real episodes: a task no answer can pass (a flat group of zeros) gives way to a letters task."""
    from simulate.local import LocalChatModel

    chat = LocalChatModel.load(embedded_model_path, device="cpu")
    never = letters_task("never").model_copy(
        update={"checks": [AnswerCheck(name="impossible", contains=["qzxjvk"])]}
    )
    tasks = [never, *(letters_task(f"letters-{i}") for i in range(3))]
    prepared, _ = await prepare_tasks(tasks, system_prompt="compact", tool_subset=0)
    bridge = RolloutBridge(prepared, tiny_config(dynamic_sampling_passes=3), policy_factory=lambda _t: chat)
    flat = prepared[0].key
    batch = await bridge.sample([flat] * 4, step=0, policy=chat)
    assert batch.resampled_groups == 1
    assert len(set(batch.keys)) == 1 and batch.keys[0] != flat
    assert has_signal([float(v.reward) for _, v in batch.episodes])
    # The flat group's episodes ran and scored 0: kept aside, not trained on.
    never_runs = [v for key, _, v in batch.extra if key == flat]
    assert len(never_runs) == 4 and all(v.reward == 0 for v in never_runs)
    out = bridge.build_output(batch, pad_id=0, seconds=1.0)
    assert all(sum(mask) > 0 for mask in out["env_mask"])
    assert bridge.history[-1].zero_variance_groups == 0


@pytest.mark.anyio
async def test_one_grpo_step_changes_the_weights(
    embedded_model_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch
    from safetensors.torch import load_file

    trained: list[dict[str, list[Any]]] = []
    build_output = RolloutBridge.build_output

    def recording(self: RolloutBridge, batch: SampledBatch, **kwargs: Any) -> dict[str, list[Any]]:
        trained.append(build_output(self, batch, **kwargs))
        return trained[-1]

    monkeypatch.setattr(RolloutBridge, "build_output", recording)
    seen: list[StepMetrics] = []
    # One task under two groups per step: the step shrinks to the one group instead of being
    # dropped by the trainer's sampler (a round of one task once trained nothing).
    config = tiny_config(tasks_per_step=2)
    with capture_logs() as logs:
        result = await train_round(
            0, [letters_task()], embedded_model_path, tmp_path, config, on_step=seen.append
        )
    assert result.steps == 1 and len(seen) == 1 and result.episodes == 4
    # The freed heap goes back to the OS after every step, not only after the round.
    assert any(e["event"] == "memory.released" and e["reason"] == "grpo step 1" for e in logs)
    # Per-task counts of the rollouts, for the curriculum.
    [outcome] = result.task_outcomes
    assert outcome.task == letters_task().full_id and outcome.episodes == 4
    assert outcome.passed == round(result.pass_rate * 4)
    step = seen[0]
    assert step.finite() and math.isfinite(step.loss) and step.entropy is not None
    assert step.clip_fraction is not None and step.tokens_per_s and step.tokens_per_s > 0
    assert step.zero_variance_fraction == 0.0, "the four answers scored alike (rare): no signal to learn from"
    before = load_file(str(embedded_model_path / "model.safetensors"))
    after = load_file(str(result.policy_dir / "model.safetensors"))
    changed = [k for k in before if k in after and not torch.equal(before[k], after[k])]
    assert len(changed) > len(before) // 2, f"only {len(changed)} of {len(before)} tensors changed"
    lineage = (result.policy_dir / "lineage.json").read_text()
    assert '"phase": "grpo"' in lineage and str(embedded_model_path) in lineage
    # The step went the right way (mean log-probability of each episode's policy tokens, before
    # and after): the best-rewarded episodes became more likely on average, the worst less, and the
    # gains follow the advantages. Not each one: when three of four share the best reward, each has
    # a third of the worst's advantage, and the weights they share can move one of them down.
    rewards = [float(r) for r in trained[0]["reward"]]
    gains = _logp_gains(embedded_model_path, result.policy_dir, trained[0])
    mean = sum(rewards) / len(rewards)
    best = [g for g, r in zip(gains, rewards, strict=True) if r == max(rewards)]
    worst = [g for g, r in zip(gains, rewards, strict=True) if r == min(rewards)]
    covariance = sum((r - mean) * g for g, r in zip(gains, rewards, strict=True))
    detail = f"log-prob gains {gains} for rewards {rewards}"
    assert sum(best) / len(best) > 0 > sum(worst) / len(worst) and covariance > 0, detail


def _logp_gains(before_dir: Path, after_dir: Path, batch: dict[str, list[Any]]) -> list[float]:
    """Per episode: the mean change of its policy tokens' log-probabilities from one policy to another."""
    import torch

    from trainer.checkpoints import load_policy
    from trainer.policy_logps import policy_token_logps

    models = [load_policy(folder, device="cpu")[0].eval() for folder in (before_dir, after_dir)]
    gains: list[float] = []
    for prompt, completion, mask in zip(
        batch["prompt_ids"], batch["completion_ids"], batch["env_mask"], strict=True
    ):
        ids = torch.tensor([prompt + completion])
        with torch.no_grad():
            before, after = (
                policy_token_logps(m, ids, torch.ones_like(ids), torch.tensor([mask]))[0].sum()
                for m in models
            )
        gains.append(float(after - before) / max(1, sum(mask)))
    return gains


@pytest.mark.anyio
async def test_a_round_trains_the_substitute_of_a_flat_group(
    embedded_model_path: Path, tmp_path: Path
) -> None:
    """Two steps over two tasks: TRL draws each once, and the step that drew the flat one trains
    a substitute group instead (the ids TRL trains on come from the bridge, not from its prompts)."""
    never = letters_task("never").model_copy(
        update={"checks": [AnswerCheck(name="impossible", contains=["qzxjvk"])]}
    )
    for attempt in range(3):
        seen: list[StepMetrics] = []
        result = await train_round(
            0,
            [never, letters_task()],
            embedded_model_path,
            tmp_path / f"attempt-{attempt}",
            tiny_config(max_steps=2, dynamic_sampling_passes=1),
            on_step=seen.append,
        )
        if result.resampled_groups and not result.zero_variance_groups:
            break
        # Sampling is not seeded: now and then the substitute group (or the other step's letters
        # group) scores alike too. Then it is discarded and trains on nothing, which is right but
        # not what this test is for; the flat task's group is always one of the discarded.
        assert result.zero_variance_groups >= 1 and result.steps == 2
    assert result.steps == 2 and result.episodes == 8
    assert result.resampled_groups == 1 and [m.resampled_groups for m in seen].count(1) == 1
    assert result.zero_variance_groups == 0, "letters groups scored alike in three rounds"
    assert all(m.finite() and m.zero_variance_fraction == 0.0 for m in seen)
    # The curriculum still hears about the flat task's episodes (run, scored, not trained on).
    outcomes = {o.task: o for o in result.task_outcomes}
    assert outcomes[never.full_id].episodes == 4 and outcomes[never.full_id].passed == 0
    assert outcomes[letters_task().full_id].episodes == 8
    # The one checkpoint (after step 2) is rated on both steps' rollouts, not the last batch alone.
    lineage = read_lineage(result.policy_dir)
    assert lineage.episodes == result.episodes == 8
    assert lineage.reward_mean == pytest.approx(result.reward_mean)


@pytest.mark.anyio
async def test_a_reused_rollout_batch_feeds_several_clipped_steps(
    embedded_model_path: Path, tmp_path: Path
) -> None:
    """`iterations_per_batch=2`: one batch of rollouts, two optimizer steps; the second compares the
    moved policy with the one that sampled (finite ratio on the policy tokens, a clip fraction)."""
    seen: list[StepMetrics] = []
    config = tiny_config(max_steps=2, iterations_per_batch=2)
    result = await train_round(
        0, [letters_task()], embedded_model_path, tmp_path, config, on_step=seen.append
    )
    assert result.steps == 2 and result.episodes == 4  # the second step drew no new rollouts
    assert [m.step for m in seen] == [1, 2]
    assert all(m.finite() and m.clip_fraction is not None for m in seen)
    assert seen[1].loss != seen[0].loss  # the same batch, a moved policy


async def _one_step_then_resume(
    model_path: Path, out_dir: Path, config: TrainerConfig
) -> tuple[TrainResult, TrainResult, list[StepMetrics]]:
    """A one-step round that checkpoints, then the same round resumed for a second step (as after a crash)."""
    seen: list[StepMetrics] = []
    first = await train_round(0, [letters_task()], model_path, out_dir, config, on_step=seen.append)
    longer = config.model_copy(update={"max_steps": 2})
    resumed = await train_round(0, [letters_task()], model_path, out_dir, longer, on_step=seen.append)
    assert (first.steps, resumed.resumed_from_step, resumed.steps) == (1, 1, 1)
    assert all(m.finite() for m in seen)
    return first, resumed, seen


def _assert_anchored_at_the_round_start(seen: list[StepMetrics]) -> None:
    """KL 0 on the round's first step (sampled from the reference itself), > 0 after the resume."""
    kl_start, kl_resumed = (m.kl for m in seen)
    assert kl_start is not None and kl_resumed is not None, "no KL logged with beta > 0"
    # 0.0 exactly when run alone (and in most suite runs); one full suite run on a 2-core AMX machine
    # logged 2.1e-5 (cause not found yet: bf16-level noise between the policy's and the reference's
    # passes). A resumed round's KL is ~1e-2, so 1e-4 still tells an anchored start from a moved one.
    assert kl_start == pytest.approx(0.0, abs=1e-4)
    flat = seen[1].zero_variance_fraction
    assert kl_resumed > 0, f"KL {kl_resumed} after a resume (flat groups {flat}: rare ties mask every token)"


@pytest.mark.anyio
async def test_a_kl_coefficient_anchors_the_policy_to_the_round_start_across_a_resume(
    embedded_model_path: Path, tmp_path: Path
) -> None:
    """With `beta` > 0 the loss carries a KL term against the policy the round started from.

    Step 1 samples from that very policy (KL 0). The round then stops after its checkpoint and
    resumes from it, as after a crash: step 2 samples from the updated policy, and its divergence
    is measured against the round's start, not against the checkpoint it resumed from (KL 0 again).
    """
    _, _, seen = await _one_step_then_resume(
        embedded_model_path, tmp_path, tiny_config(beta=0.2, save_every=1)
    )
    _assert_anchored_at_the_round_start(seen)


@pytest.mark.anyio
async def test_a_lora_round_checkpoints_merged_weights_and_resumes_its_adapter(
    embedded_model_path: Path, tmp_path: Path
) -> None:
    """LoRA: a checkpoint is the full merged model (what a server loads) plus the adapter alone.

    Only the adapted projections change. A resumed round continues that adapter on the round's
    starting weights, so its KL reference is still those weights (KL > 0 after the resume).
    """
    lora = LoraConfig(enabled=True, r=8, alpha=16)
    config = tiny_config(beta=0.2, save_every=1, learning_rate=1e-3, lora=lora)
    first, resumed, seen = await _one_step_then_resume(embedded_model_path, tmp_path, config)
    _assert_anchored_at_the_round_start(seen)
    adapter = first.policy_dir / "adapter"
    assert (adapter / "adapter_config.json").is_file() and (adapter / "adapter_model.safetensors").is_file()
    for checkpoint in (first.policy_dir, resumed.policy_dir):
        assert_merged_lora_checkpoint(embedded_model_path, checkpoint, lora)
