"""The SFT warm-up: reference trajectories rendered like episodes, loss on assistant tokens only."""

from __future__ import annotations

from pathlib import Path

import pytest

from arena.env.registry import Registry
from arena.episode.history import policy_view
from arena.tasks.toml_io import load_tasks
from trainer.config import SftConfig
from trainer.sft import IGNORE, needs_warmup, reference_messages, render_examples, sft_warmup
from trainer.tasks import prepare_tasks

from .tiny import tiny_config

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
    examples = render_examples(tok, prepared[0], messages, history_turns=None, max_length=4096)
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
