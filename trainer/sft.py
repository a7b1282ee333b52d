"""The SFT warm-up: supervised training on the reference trajectories of tasks.

A reference trajectory is what a perfect episode would look like: the task's reference calls
(written the way the policy writes them, a Hermes `<tool_call>` block per assistant turn), their
real results (replayed on a fresh instance of the environment) and the reference answer. It is
rendered through the same chat template and template arguments (`simulate.chat_format`), tool
list, system prompt and history function (`policy_view`) as the episodes, turn by turn, each turn
extending the token chain as a rollout's turns do (`simulate.token_chain`): the loss is on the
assistant tokens only (what the policy would have sampled, end-of-turn token included); system
prompt, task, tool results and template glue are context.
"""

from __future__ import annotations

import functools
import json
import math
import random
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.from_thread
import anyio.to_thread
import structlog

from arena.episode.history import policy_view
from arena.episode.parser import call_block, clean_text, in_schema_order
from arena.episode.prompts import tool_observation
from arena.tasks.grounding import reference_ungrounded
from arena.tasks.model import Task
from arena.tasks.replay import first_failure, replay_reference
from arena.types import Message, ToolCall
from simulate.token_chain import ChatRenderer, begin_turn, chained_prompt, end_turn, token_session
from trainer.checkpoints import LINEAGE_FILE, Lineage, load_policy, save_checkpoint
from trainer.config import TrainerConfig
from trainer.metrics import CheckpointInfo, OnStep, SafePoint, StepMetrics, TrainResult
from trainer.precision import assistant_token_loss, autocast, train_dtype, use_bf16
from work.tasks import PreparedTask, prepare_tasks

log = structlog.get_logger(__name__)

IGNORE = -100


@dataclass
class SftExample:
    """One token sequence with labels (`IGNORE` where there is no loss)."""

    task: str
    input_ids: list[int] = field(default_factory=list)
    labels: list[int] = field(default_factory=list)

    @property
    def trained_tokens(self) -> int:
        return sum(1 for x in self.labels if x != IGNORE)


def call_text(call: ToolCall) -> str:
    """A tool call as the policy writes it (the Hermes block of the chat template)."""
    return call_block(call.name, json.dumps(call.arguments, ensure_ascii=False))


def opening_request(task: Task) -> str:
    """The first user message of a task's reference conversation (see `reference_messages`)."""
    if task.mode == "conversational" and task.user is not None:
        return task.user.intent
    return task.instruction


async def reference_messages(item: PreparedTask, *, sandbox: Any = None) -> list[Message] | None:
    """The conversation of a perfect episode (None when a reference call fails on replay).

    A conversational task opens with a greeting and reveals its intent through a simulated user;
    its reference has no user turns, so here the user states the whole intent up front (training
    on the greeting would teach the policy to act on a request nobody made).
    """
    task = item.task
    instance, results = await replay_reference(item.env, task, sandbox=sandbox)
    await instance.aclose()
    if first_failure(results) is not None:
        return None
    messages = [
        Message(role="system", content=item.system_prompt),
        Message(role="user", content=opening_request(task)),
    ]
    schemas = {t.name: t.parameters for t in item.env.tool_specs}
    for i, (call, result) in enumerate(zip(task.reference, results, strict=True)):
        # Arguments in schema order: what constrained decoding writes (see simulate.constrained).
        arguments = in_schema_order(call.arguments, schemas.get(call.name, {}))
        call = call.model_copy(update={"id": call.id or f"call_{i}", "arguments": arguments})
        messages.append(Message(role="assistant", content=call_text(call), tool_calls=[call]))
        observation = clean_text(tool_observation(result.ok, result.output, result.error))
        messages.append(Message(role="tool", content=observation, tool_call_id=call.id, name=call.name))
    messages.append(Message(role="assistant", content=task.answer or "Done."))
    return messages


def render_examples(
    tokenizer: Any,
    item: PreparedTask,
    messages: list[Message],
    *,
    history_turns: int | None,
    max_length: int,
    template_kwargs: Mapping[str, Any],
) -> list[SftExample]:
    """Token sequences of one reference conversation, chained as rollouts chain (module docstring).

    Each assistant turn's prompt is the token chain so far extended by the messages since the last
    turn (`simulate.token_chain`), rendered with the policy's chat-template arguments
    (`TrainerConfig.chat_template_kwargs`): the context GRPO samples that turn in. A history window
    that drops old turns renders the prompt whole and starts a new example.
    """
    renderer = ChatRenderer(tokenizer, template_kwargs=template_kwargs)
    tools = list(item.env.tool_specs) or None
    end_ids = renderer.close([])  # the end-of-turn token a sampled turn ends on
    examples: list[SftExample] = []
    current: SftExample | None = None
    with token_session():
        for k, message in enumerate(messages):
            if message.role != "assistant":
                continue
            view = policy_view(messages[:k], history_turns)
            begin_turn(view, tools)
            prompt = chained_prompt(renderer, view, tools)
            target = renderer.encode(message.content) + end_ids
            if current is not None and prompt[: len(current.input_ids)] == current.input_ids:
                extra = prompt[len(current.input_ids) :]
            else:
                current = SftExample(task=item.key)
                examples.append(current)
                extra = prompt
            current.input_ids += extra + target
            current.labels += [IGNORE] * len(extra) + target
            end_turn(prompt, target)
    return [e for e in examples if len(e.input_ids) <= max_length and e.trained_tokens > 0]


async def build_examples(
    prepared: Sequence[PreparedTask], tokenizer: Any, config: TrainerConfig, *, sandbox: Any = None
) -> tuple[list[SftExample], list[str]]:
    """SFT examples for every task with a replayable, grounded reference; the skipped tasks with a reason."""
    examples: list[SftExample] = []
    skipped: list[str] = []
    for item in prepared:
        if not item.task.reference:
            skipped.append(f"{item.key}: no reference calls")
            continue
        messages = await reference_messages(item, sandbox=sandbox)
        if messages is None:
            skipped.append(f"{item.key}: a reference call fails on replay")
            continue
        ungrounded = reference_ungrounded(item.env, item.task, messages)
        if ungrounded:
            # Imitating it would teach the policy to write ids from memory.
            skipped.append(
                f"{item.key}: the reference writes ids it never looked up: {', '.join(ungrounded)}"
            )
            continue
        rendered = render_examples(
            tokenizer,
            item,
            messages,
            history_turns=config.episode.history_turns,
            max_length=config.sft.max_length,
            template_kwargs=config.chat_template_kwargs,
        )
        if not rendered:
            skipped.append(f"{item.key}: longer than sft.max_length ({config.sft.max_length} tokens)")
        examples.extend(rendered)
    return examples, skipped


def _batches(examples: list[SftExample], batch_size: int, epochs: float, seed: int) -> list[list[SftExample]]:
    rng = random.Random(seed)
    total = max(1, math.ceil(len(examples) * epochs))
    order: list[SftExample] = []
    while len(order) < total:
        block = list(examples)
        rng.shuffle(block)
        order.extend(block)
    order = order[:total]
    return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]


def _train_sync(
    model: Any,
    tokenizer: Any,
    examples: list[SftExample],
    config: TrainerConfig,
    round_id: int,
    on_step: OnStep | None,
    safe_point: SafePoint | None,
) -> tuple[list[StepMetrics], BaseException | None]:
    """The supervised loop (blocking, in a worker thread): AdamW, linear warm-up, assistant-only loss."""
    import torch

    sft = config.sft
    torch.manual_seed(sft.seed)
    device = next(model.parameters()).device
    trained = [p for p in model.parameters() if p.requires_grad]
    # Autocast over fp32 trained weights (a LoRA base may be bf16; its fp32 adapters decide).
    bf16 = use_bf16(config.bf16, device.type) and all(p.dtype == torch.float32 for p in trained)
    batches = _batches(examples, sft.batch_size, sft.epochs, sft.seed)
    optimizer = torch.optim.AdamW(
        trained,
        lr=sft.learning_rate,
        weight_decay=sft.weight_decay,
    )
    warmup = max(1, int(len(batches) * sft.warmup_ratio))
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min(1.0, (s + 1) / warmup) * max(0.0, (len(batches) - s) / len(batches))
    )
    if config.gradient_checkpointing:
        model.gradient_checkpointing_enable()
    model.train()
    metrics: list[StepMetrics] = []
    stop: BaseException | None = None
    for step, batch in enumerate(batches, start=1):
        started = time.perf_counter()
        # One example per forward/backward pass (memory stays that of one sequence); each pass's
        # mean loss is weighted by its share of the batch's trained tokens, so the step's gradient
        # is that of the token-mean loss over the whole batch.
        tokens = sum(e.trained_tokens for e in batch)
        total_loss = 0.0
        for e in batch:
            ids = torch.tensor([e.input_ids], device=device)
            labels = torch.tensor([e.labels], device=device)
            with autocast(bf16, device.type):
                loss = assistant_token_loss(model, ids, labels, IGNORE) * (e.trained_tokens / tokens)
            loss.backward()
            total_loss += float(loss.detach())
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), config.max_grad_norm)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        seconds = time.perf_counter() - started
        record = StepMetrics(
            phase="sft",
            round_id=round_id,
            step=step,
            loss=total_loss,
            learning_rate=float(scheduler.get_last_lr()[0]),
            grad_norm=float(grad_norm),
            tokens_per_s=tokens / seconds if seconds > 0 else None,
            seconds=seconds,
        )
        metrics.append(record)
        log.info(
            "sft.step", step=step, of=len(batches), loss=round(record.loss, 4), seconds=round(seconds, 2)
        )
        if on_step is not None:
            on_step(record)
        if safe_point is not None and step < len(batches):
            try:
                anyio.from_thread.run(safe_point)
            except BaseException as exc:  # stop requested: keep what was learnt so far
                stop = exc
                break
    model.eval()
    return metrics, stop


def needs_warmup(policy_dir: Path, config: TrainerConfig) -> bool:
    """Whether the daemon should warm up before GRPO: SFT is enabled and the policy is fresh.

    A fresh policy is a model folder that no Arena run produced (it has no lineage file).
    """
    return config.sft.enabled and not (Path(policy_dir) / LINEAGE_FILE).is_file()


async def sft_warmup(
    round_id: int,
    tasks: Sequence[Task],
    policy_dir: Path,
    out_dir: Path,
    config: TrainerConfig,
    on_step: OnStep | None = None,
    safe_point: SafePoint | None = None,
    *,
    envs: Any = None,
    sandbox: Any = None,
) -> TrainResult:
    """Supervised warm-up on the reference trajectories of `tasks`, starting from `policy_dir`.

    Saves one checkpoint (phase "sft") in `out_dir/checkpoints/` and returns it as `policy_dir`.
    If `out_dir` already holds a finished SFT checkpoint of this round, returns it without
    training again. `safe_point` is awaited between optimizer steps; if it raises, the weights
    learnt so far are saved and the exception propagates.
    """
    from trainer.checkpoints import latest_checkpoint

    started = time.perf_counter()
    out_dir = Path(out_dir)
    latest = latest_checkpoint(out_dir)
    if (
        latest is not None
        and latest[1].phase == "sft"
        and latest[1].round_id == round_id
        and not latest[1].extra.get("interrupted")
    ):
        return TrainResult(
            round_id=round_id,
            phase="sft",
            policy_dir=latest[0],
            steps=0,
            total_steps=latest[1].step,
            seconds=time.perf_counter() - started,
            checkpoints=[CheckpointInfo(path=latest[0], step=latest[1].step)],
        )
    # Tasks of simulated environments have no reference trajectory (and no real tool results).
    simulated = [t for t in tasks if t.origin == "simulated"]
    prepared, skipped = await prepare_tasks(
        [t for t in tasks if t.origin != "simulated"],
        envs,
        sandbox=sandbox,
        system_prompt=config.system_prompt,
        tool_subset=config.tool_subset,
    )
    skipped += [f"{t.full_id}: no reference trajectory (simulated)" for t in simulated]
    import torch

    device = "cuda" if torch.cuda.is_available() else "cpu"
    model, tokenizer = await anyio.to_thread.run_sync(
        functools.partial(
            load_policy, Path(policy_dir), device=device, dtype=train_dtype(device, lora=config.lora.enabled)
        )
    )
    if config.lora.enabled:  # a large model's warm-up trains adapters too; the checkpoint merges them
        from peft import get_peft_model

        model = get_peft_model(model, config.lora.peft_config())
        if config.gradient_checkpointing:
            model.enable_input_require_grads()  # the frozen embeddings would cut the graph otherwise
    examples, unrendered = await build_examples(prepared, tokenizer, config, sandbox=sandbox)
    skipped += unrendered
    if not examples:
        raise ValueError(
            f"no reference trajectories to train on ({len(skipped)} tasks skipped: {skipped[:3]})"
        )
    log.info(
        "sft.start",
        round=round_id,
        examples=len(examples),
        skipped=len(skipped),
        tokens=sum(len(e.input_ids) for e in examples),
    )
    metrics, stop = await anyio.to_thread.run_sync(
        _train_sync, model, tokenizer, examples, config, round_id, on_step, safe_point
    )
    lineage = Lineage(
        parent=str(policy_dir),
        round_id=round_id,
        phase="sft",
        step=len(metrics),
        total_steps=len(metrics),
        episodes=len(examples),
        extra={"interrupted": stop is not None, "final_loss": metrics[-1].loss if metrics else None},
    )
    if config.lora.enabled:  # the adapter merged in fp32 onto the weights the warm-up started from
        from trainer.lora_export import merged_model

        model = await anyio.to_thread.run_sync(merged_model, model, Path(policy_dir))
    path = await anyio.to_thread.run_sync(save_checkpoint, model, tokenizer, out_dir, lineage)
    if stop is not None:
        raise stop
    return TrainResult(
        round_id=round_id,
        phase="sft",
        policy_dir=path,
        steps=len(metrics),
        total_steps=len(metrics),
        examples=len(examples),
        skipped=len(skipped),
        seconds=time.perf_counter() - started,
        checkpoints=[CheckpointInfo(path=path, step=len(metrics))],
        metrics=metrics,
    )
