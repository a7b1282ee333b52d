"""Tiny tasks and configs that keep CPU GRPO steps short (shared by the tests and the resume worker)."""

from __future__ import annotations

from pathlib import Path

from arena.episode.runner import EpisodeConfig
from arena.protocols import UserContext
from arena.tasks.model import RubricCheck, Task
from arena.tasks.reward import RewardConfig
from arena.types import SamplingParams
from trainer.config import LoraConfig, SftConfig, TrainerConfig
from trainer.gpu_check import signal_task


def letters_task(task_id: str = "say-something") -> Task:
    """`trainer.gpu_check.signal_task`: the share of nine mid-frequency letters in the answer.

    A synthetic shaping task for the training loop's own tests: it is scored with
    `RewardConfig(shaping_only=True)` (see `tiny_config`), since the letters are no observed values
    and a read-only task would otherwise pay only when all nine appear. A GRPO step on it has a
    learning signal without needing a model that can already use tools.
    """
    return signal_task(task_id)


def simulated_weather_task() -> Task:
    """A task of the simulated weather service as the TRUSTEE generator writes them (fixed: no helper
    call to write it), on two of its tools; the helper judges it by its rubric."""
    return Task(
        id="sim-7-paris",
        env="weather",
        instruction="Is it warm in Paris right now?",
        user=UserContext(intent="Know the current temperature in Paris", persona="novice user"),
        checks=[
            RubricCheck(
                name="intent",
                criteria=[
                    "The assistant looked up the current weather in Paris",
                    "It states the temperature",
                ],
            )
        ],
        difficulty={
            "walk_length": 1,
            "tool_subset": "get_current_weather,get_daily_forecast",
            "expected_tools": "get_current_weather",
        },
        origin="simulated",
    )


def tiny_config(**update: object) -> TrainerConfig:
    """Short episodes, compact prompt, no tools shown: one CPU step in tens of seconds."""
    base = TrainerConfig(
        group_size=4,
        tasks_per_step=1,
        max_steps=1,
        learning_rate=1e-4,
        # The trainer's defaults before they became the daemon's, which these tests were written for.
        keep_last=2,
        sft=SftConfig(epochs=3.0, learning_rate=5e-5),
        system_prompt="compact",
        tool_subset=0,
        gradient_checkpointing=False,
        reward=RewardConfig(shaping_only=True),
        episode=EpisodeConfig(
            max_turns=1,
            max_tokens_per_turn=12,
            max_total_tokens=512,
            params=SamplingParams(temperature=1.0, logprobs=True),
        ),
    )
    return base.model_copy(update=update)


def resume_config() -> TrainerConfig:
    """Two steps with a checkpoint after each: the run the resume test kills after step 1."""
    base = tiny_config(group_size=2, max_steps=2, save_every=1, keep_last=3)
    return base.model_copy(update={"episode": base.episode.model_copy(update={"max_tokens_per_turn": 4})})


def assert_merged_lora_checkpoint(base_dir: Path, checkpoint: Path, lora: LoraConfig) -> None:
    """`checkpoint` is the plain merged model: the base's tensors, of which only LoRA-adapted ones changed."""
    import torch
    from safetensors.torch import load_file

    before = load_file(str(base_dir / "model.safetensors"))
    after = load_file(str(checkpoint / "model.safetensors"))
    assert set(after) == set(before), "the checkpoint is not the plain merged model"
    adapted = {k for k in before if any(f".{m}." in k for m in lora.target_modules)}
    changed = {k for k in before if not torch.equal(before[k], after[k])}
    assert changed and changed <= adapted, sorted(changed - adapted)[:3] or "nothing changed"


def tiny_causal_lm(seed: int = 0, **config: int) -> object:
    """A randomly initialised two-layer Llama (about 0.3M weights, std 0.02): precision tests in seconds."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    shape = {
        "vocab_size": 512,
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "max_position_embeddings": 256,
    } | config
    return LlamaForCausalLM(LlamaConfig(**shape, initializer_range=0.02)).eval()


def tiny_tokenizer(vocab: int = 512) -> object:
    """A word-level tokenizer of `vocab` words "t0".."t{vocab-1}" (t0 pads, t1 ends): for TRL
    trainers over `tiny_causal_lm` that never read text."""
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast

    words = {f"t{i}": i for i in range(vocab)}
    return PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer(models.WordLevel(words, unk_token="t0")), pad_token="t0", eos_token="t1"
    )
