"""GRPO's log-probabilities on policy tokens only equal TRL's own scoring where the loss looks."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from trainer.policy_logps import policy_token_logps


@pytest.mark.model
def test_policy_token_logps_match_trl_scoring_under_the_mask(embedded_model_path: Path) -> None:
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    import torch
    from transformers import AutoModelForCausalLM
    from trl.trainer.utils import add_fused_lm_head

    model = AutoModelForCausalLM.from_pretrained(embedded_model_path, dtype=torch.float32)
    add_fused_lm_head(model, outputs=("log_probs", "entropy"))
    gen = torch.Generator().manual_seed(0)
    prompt, width = 40, 60
    ids = torch.randint(0, 40_000, (2, prompt + width), generator=gen)
    attention = torch.ones_like(ids)
    attention[1, :5] = 0  # a left-padded prompt in the second row
    mask = torch.zeros(2, width, dtype=torch.long)
    mask[0, 3:20] = 1  # policy turns; the rest stands for tool results and glue
    mask[1, 10:30] = 1
    mask[1, 45:50] = 1
    with torch.no_grad():
        labels = ids.masked_fill(attention == 0, -100)
        labels[:, :prompt] = -100
        trl = model(input_ids=ids, attention_mask=attention, labels=labels, fused_lm_head=True)
        ours, entropy = policy_token_logps(model, ids, attention, mask, compute_entropy=True)
    on = mask.bool()
    assert torch.allclose(ours[on], trl.log_probs[:, -width:][on], atol=1e-4)
    assert torch.allclose(entropy[on], trl.entropy[:, -width:][on], atol=1e-3)
    assert (ours[~on] == 0).all() and (entropy[~on] == 0).all()


@pytest.mark.model
def test_an_all_masked_micro_batch_costs_nothing_but_keeps_the_graph(embedded_model_path: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(embedded_model_path, dtype=torch.float32)
    ids = torch.randint(0, 40_000, (1, 50), generator=torch.Generator().manual_seed(1))
    logps, entropy = policy_token_logps(
        model, ids, torch.ones_like(ids), torch.zeros(1, 20, dtype=torch.long), compute_entropy=True
    )
    assert logps.shape == (1, 20) and (logps == 0).all() and logps.requires_grad
    logps.sum().backward()  # no error: a zero gradient
    assert entropy is not None and (entropy == 0).all()


@pytest.mark.model
def test_a_reused_generation_scores_against_old_logps_only_where_the_loss_looks(
    embedded_model_path: Path, tmp_path: Path
) -> None:
    """The loss of a reused generation (stored old log-probs) is the on-policy loss when the policy has
    not moved, even where an old log-prob outside the mask is extreme (exp(0 - old) would overflow)."""
    import torch
    from datasets import Dataset

    from trainer.checkpoints import load_policy
    from trainer.grpo import grpo_args
    from trainer.policy_logps import policy_token_trainer_class

    from .tiny import tiny_config

    model, tokenizer = load_policy(embedded_model_path, device="cpu")
    config = tiny_config(iterations_per_batch=2, micro_batch_size=2, group_size=2)
    trainer = policy_token_trainer_class()(
        model=model,
        reward_funcs=[lambda completions, **_: [0.0] * len(completions)],
        args=grpo_args(config, tmp_path, max_steps=1, seed=0),
        train_dataset=Dataset.from_list([{"prompt": "hi"}]),
        processing_class=tokenizer,
    )
    trainer.current_gradient_accumulation_steps = 1
    gen = torch.Generator().manual_seed(0)
    prompt = torch.randint(0, 40_000, (2, 12), generator=gen)
    completion = torch.randint(0, 40_000, (2, 16), generator=gen)
    policy = torch.zeros(2, 16, dtype=torch.long)
    policy[:, 2:6] = 1  # a policy turn, then a tool result (0) the loss must not look at
    policy[:, 11:14] = 1
    inputs = {
        "prompt_ids": prompt,
        "prompt_mask": torch.ones_like(prompt),
        "completion_ids": completion,
        "completion_mask": torch.ones_like(completion),
        "tool_mask": policy,
        "advantages": torch.tensor([1.0, -1.0]),
        "num_items_in_batch": policy.sum().float(),
    }
    on_policy = trainer._compute_loss(trainer.model, dict(inputs))
    ids = torch.cat([prompt, completion], dim=1)
    with torch.no_grad(), trainer.accelerator.autocast():  # as the loss scores them
        current, _ = policy_token_logps(trainer.model, ids, torch.ones_like(ids), policy)
    for extreme in (-1e4, float("-inf")):
        old = current.masked_fill(policy == 0, extreme)
        reused = trainer._compute_loss(trainer.model, {**inputs, "old_per_token_logps": old})
        assert torch.isfinite(reused), extreme
        assert torch.allclose(reused, on_policy, atol=1e-5), (extreme, reused, on_policy)


def grammar_forced_positions(chat: object, tools: list, completion_ids: list[int]) -> list[int]:
    """Replays the tool-call grammar over a completion: the positions where it admitted one token only."""
    import torch
    import xgrammar

    grammars = chat._grammars  # type: ignore[attr-defined]
    matcher = grammars.matcher(grammars.compile_tool_calls(tools, required=True))
    bitmask = xgrammar.allocate_token_bitmask(1, grammars.vocab_size)
    forced = []
    for i, token in enumerate(completion_ids):
        if matcher.is_terminated():
            break
        matcher.fill_next_token_bitmask(bitmask, 0)
        logits = torch.zeros(1, grammars.vocab_size)
        xgrammar.apply_token_bitmask_inplace(logits, bitmask, vocab_size=grammars.vocab_size)
        if int(torch.isfinite(logits).sum()) == 1:
            forced.append(i)
        assert matcher.accept_token(token), f"token {i} was not admitted by the grammar"
    return forced


@pytest.mark.model
@pytest.mark.slow
@pytest.mark.anyio
async def test_a_constrained_rollout_trains_what_it_sampled_and_nothing_the_grammar_forced(
    embedded_model_path: Path,
) -> None:
    """Real constrained episodes with the embedded model (fp32 on both sides, temperature 1): on
    every trained token the trainer's log-prob is the sampler's; the tokens the grammar forced
    (the call's fixed JSON around the policy's choices) are out of the loss."""
    import torch

    from arena.env.registry import Registry
    from arena.types import SamplingParams
    from simulate.fidelity import usable_tasks
    from simulate.local import LocalChatModel
    from trainer.rollout import RolloutBridge, SampledBatch
    from trainer.samples import training_sample
    from work.tasks import prepare_tasks

    from .tiny import tiny_config

    chat = LocalChatModel.load(embedded_model_path, device="cpu", dtype="float32")
    library = Registry().load_all()["library"]
    tasks, _ = await prepare_tasks(
        usable_tasks(library, 1, []), {"library": library}, system_prompt="compact", tool_subset=1
    )
    params = SamplingParams(
        temperature=1.0,
        logprobs=True,
        seed=7,
        max_tokens=32,
        constrain_tool_calls=True,
        require_tool_call=True,
    )
    config = tiny_config()
    episode = {"max_turns": 1, "max_tokens_per_turn": 32, "max_total_tokens": 4096, "params": params}
    config = config.model_copy(update={"episode": config.episode.model_copy(update=episode)})
    bridge = RolloutBridge(tasks, config, policy_factory=lambda _t: chat)
    episodes = await bridge.rollout([tasks[0].key] * 2, chat)
    tools = list(tasks[0].env.tool_specs)  # what the episodes were shown
    trained_total = forced_total = 0
    for transcript, _ in episodes:
        prompt, completion, mask, sampled = training_sample(transcript, pad_id=0)
        ids = torch.tensor([prompt + completion])
        with torch.no_grad():
            logps, _ = policy_token_logps(chat.model, ids, torch.ones_like(ids), torch.tensor([mask]))
        on = [i for i, m in enumerate(mask) if m]
        assert on, transcript.finish
        assert max(abs(float(logps[0, i]) - sampled[i]) for i in on) < 1e-3
        # The grammar's own account of which tokens it forced, turn by turn: none of them is trained.
        position = 0
        for segment in transcript.chains[0].segments[1:]:
            if segment.kind == "policy":
                forced = grammar_forced_positions(chat, tools, segment.token_ids)
                assert forced and sorted(segment.forced) == forced
                assert all(mask[position + i] == 0 for i in forced)
                trained_total += sum(mask[position : position + len(segment.token_ids)])
                forced_total += len(forced)
            position += len(segment.token_ids)
    assert trained_total and forced_total
    bridge.build_output(SampledBatch([tasks[0].key] * 2, episodes), pad_id=0, seconds=1.0)
    assert bridge.history[-1].forced_tokens == forced_total
