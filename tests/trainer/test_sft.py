"""The SFT warm-up: reference trajectories rendered like episodes, loss on assistant tokens only."""

from __future__ import annotations

from pathlib import Path

import pytest

from arena.env.registry import Registry
from arena.episode.history import policy_view
from arena.episode.runner import EpisodeConfig, run_episode
from arena.protocols import UserContext
from arena.tasks.toml_io import load_tasks
from arena.types import Completion, Message, ToolSpec, Usage
from trainer.config import LoraConfig, SftConfig
from trainer.sft import (
    IGNORE,
    needs_warmup,
    opening_request,
    reference_messages,
    render_examples,
    sft_warmup,
)
from work.tasks import prepare_tasks

from .tiny import assert_merged_lora_checkpoint, letters_task, tiny_config

pytestmark = pytest.mark.model


def library_task(task_id: str):  # -> Task
    env = Registry().get("library")
    return next(t for t in load_tasks(env.path, env.name, tools=env.tools) if t.id == task_id)


@pytest.mark.anyio
async def test_reference_trajectory_trains_only_assistant_tokens(embedded_model_path: Path) -> None:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(embedded_model_path))
    task = library_task("renew-project-hail-mary")
    prepared, _ = await prepare_tasks([task], system_prompt="compact", tool_subset=0)
    messages = await reference_messages(prepared[0])
    assert messages is not None
    assert [m.role for m in messages] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
    ]
    assert "LN-5001" in messages[3].content  # the real result of get_account, replayed
    examples = render_examples(
        tok, prepared[0], messages, history_turns=None, max_length=4096, template_kwargs={}
    )
    assert len(examples) == 1  # the turns chain into one sequence, like a rollout
    ex = examples[0]
    trained = [t for t, label in zip(ex.input_ids, ex.labels, strict=True) if label != IGNORE]
    assert tok.decode(trained) == "".join(m.content + "<|im_end|>" for m in messages if m.role == "assistant")
    assert all(label in (IGNORE, t) for t, label in zip(ex.input_ids, ex.labels, strict=True))
    context = tok.decode([t for t, label in zip(ex.input_ids, ex.labels, strict=True) if label == IGNORE])
    assert "<tool_response>" in context and task.instruction in context
    # The sequence is exactly the template's rendering of the whole conversation.
    full = tok.apply_chat_template(
        [m.openai() for m in policy_view(messages)],
        tools=[t.openai() for t in prepared[0].env.tool_specs],
        tokenize=False,
    )
    assert tok.decode(ex.input_ids) == full.rstrip("\n")


class ScriptedReferencePolicy:
    """A scripted policy that plays a reference conversation's assistant turns, in order.

    Its prompts are the real model's (`LocalChatModel.render_prompt`: chat template, tools, earlier
    turns' ids) and its completions are the turn's text tokenized, then the end-of-turn token: the
    token chain a real policy would leave had it sampled exactly the reference.
    """

    def __init__(self, chat: object, turns: list[str]) -> None:
        self.chat_model = chat
        self.turns = list(turns)

    async def chat(
        self, messages: list[Message], *, tools: list[ToolSpec] | None = None, params: object = None
    ) -> Completion:
        tok = self.chat_model.tokenizer
        prompt = self.chat_model.render_prompt(messages, tools)
        text = self.turns.pop(0)
        completion = [
            *tok(text, add_special_tokens=False)["input_ids"],
            tok.convert_tokens_to_ids("<|im_end|>"),
        ]
        return Completion(
            text=text,
            prompt_token_ids=prompt,
            completion_token_ids=completion,
            usage=Usage(prompt_tokens=len(prompt), completion_tokens=len(completion)),
        )


@pytest.mark.anyio
@pytest.mark.parametrize("task_id", ["renew-project-hail-mary", "renew-everything-possible"])
async def test_reference_example_is_the_token_chain_of_an_episode_playing_it(
    embedded_model_path: Path, task_id: str
) -> None:
    """SFT trains on exactly the tokens, and the loss mask, of an episode that replays the reference
    through the episode runner: no train/serve difference in prompts, history or observations."""
    from simulate.local import LocalChatModel

    chat = LocalChatModel.load(embedded_model_path, device="cpu")
    prepared, _ = await prepare_tasks([library_task(task_id)], system_prompt="compact", tool_subset=1)
    item = prepared[0]
    messages = await reference_messages(item)
    assert messages is not None
    [example] = render_examples(
        chat.tokenizer, item, messages, history_turns=None, max_length=1 << 16, template_kwargs={}
    )
    policy = ScriptedReferencePolicy(chat, [m.content for m in messages if m.role == "assistant"])
    instance = item.env.new_instance()
    try:
        transcript = await run_episode(
            policy, instance, item.task, config=EpisodeConfig(max_turns=8), system_prompt=item.system_prompt
        )
    finally:
        await instance.aclose()
    assert transcript.finish == "answered" and not policy.turns and not transcript.chain_breaks
    [chain] = transcript.chains
    assert chain.prompt_ids() + chain.completion_ids() == example.input_ids
    trained = [0] * len(chain.prompt_ids()) + chain.mask()
    assert trained == [int(label != IGNORE) for label in example.labels]


@pytest.mark.anyio
async def test_warmup_step_saves_a_checkpoint_and_is_not_repeated(
    embedded_model_path: Path, tmp_path: Path
) -> None:
    config = tiny_config(sft=SftConfig(epochs=1.0, batch_size=1, learning_rate=1e-4))
    assert needs_warmup(embedded_model_path, config)
    task = library_task("renew-project-hail-mary")
    result = await sft_warmup(0, [task], embedded_model_path, tmp_path, config)
    assert result.steps == 1 and result.examples == 1 and result.metrics[0].finite()
    assert result.metrics[0].loss > 0
    assert not needs_warmup(result.policy_dir, config)
    again = await sft_warmup(0, [task], embedded_model_path, tmp_path, config)
    assert again.steps == 0 and again.policy_dir == result.policy_dir


@pytest.mark.anyio
async def test_a_lora_warmup_trains_adapters_and_saves_the_merged_model(
    embedded_model_path: Path, tmp_path: Path
) -> None:
    lora = LoraConfig(enabled=True, r=8, alpha=16)
    config = tiny_config(lora=lora, sft=SftConfig(epochs=1.0, batch_size=1, learning_rate=1e-3))
    task = library_task("renew-project-hail-mary")
    result = await sft_warmup(0, [task], embedded_model_path, tmp_path, config)
    assert result.steps == 1 and result.metrics[0].finite() and result.metrics[0].loss > 0
    # Only the adapted projections moved: the step trained adapters, not the full weights.
    assert_merged_lora_checkpoint(embedded_model_path, result.policy_dir, lora)


def test_a_conversational_tasks_reference_opens_with_its_whole_intent() -> None:
    """The SFT reference of a conversational task opens with the whole intent, not the greeting."""
    task = letters_task().model_copy(
        update={
            "mode": "conversational",
            "instruction": "Hi, I need some help.",
            "user": UserContext(intent="Say hello to me in one short sentence."),
        }
    )
    assert opening_request(task) == "Say hello to me in one short sentence."
    assert opening_request(letters_task()) == letters_task().instruction
