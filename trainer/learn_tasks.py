"""Task sets of the learning benchmark beyond the bundled ones: what counts as a held-out task,
graph-synthesized tasks, and the token-budget filter that keeps only tasks a perfect policy can pass.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread

from arena.synth.filters import reference_key
from arena.tasks.model import Task
from trainer.config import TrainerConfig
from trainer.tasks import prepare_tasks


def is_eval_task(task: Task, env: Any) -> bool:
    """A multi-step task: two or more reference calls, at least one write, autonomous."""
    writes = set(env.write_tools)
    return (
        task.mode == "autonomous"
        and len(task.reference) >= 2
        and any(c.name in writes for c in task.reference)
    )


async def synthesized_tasks(
    envs: dict[str, Any], names: list[str], per_env: int, *, seed: int = 0
) -> list[Task]:
    """`per_env` gated graph tasks (at least one write) for each of the environments `names`.

    Half have two reference calls, half three (the held-out tasks need two to four: a policy
    trained on one length learns to stop at it). The instructions name things by their attributes
    (ambiguity 1: "the booking at Harborview Suites", not "BK-2042") and every id in a reference
    call comes from the instruction or an earlier result (`grounded`): the look-up-then-act shape
    of the held-out tasks, with no reference that would teach the policy to invent an id.
    """
    from arena.difficulty import Difficulty
    from arena.synth.graph_tasks import synthesize_graph_tasks

    out: list[Task] = []
    lengths = {2: per_env - per_env // 2, 3: per_env // 2}
    for name in names:
        if name not in envs:
            continue
        for offset, (length, n) in enumerate(lengths.items()):
            if n == 0:
                continue
            result = await synthesize_graph_tasks(
                envs[name],
                n,
                seed=seed + offset,  # task ids derive from the seed: one per length keeps them unique
                difficulty=Difficulty(walk_length=length, ambiguity=1),
                grounded=True,
                # Grounded short walks are rare in some envs (flights: none of 24 at length 2);
                # template-written candidates cost milliseconds, so look further.
                max_attempts=48 * n,
            )
            out.extend(result.tasks)
    return out


async def perfect_episode_tokens(item: Any, tokenizer: Any, config: TrainerConfig) -> int | None:
    """The tokens of a task's perfect episode as the policy sees it (its longest chain; None when
    its reference does not replay)."""
    from trainer.sft import reference_messages, render_examples

    messages = await reference_messages(item)
    if messages is None:
        return None
    examples = render_examples(
        tokenizer,
        item,
        messages,
        history_turns=config.episode.history_turns,
        max_length=1 << 20,
        template_kwargs=config.chat_template_kwargs,
    )
    return max((len(e.input_ids) for e in examples), default=None)


async def within_budget(
    prepared: list[Any], tokenizer_dir: Path, config: TrainerConfig, *, only: set[str] | None = None
) -> tuple[list[Any], list[str]]:
    """The tasks whose perfect episode fits `config.episode.max_total_tokens`, and why others don't.

    A task over the budget could never pass, whatever the policy: it measures nothing. `only`
    limits the check to those task keys (the hand-written set is checked by a test instead).
    """
    from transformers import AutoTokenizer

    tokenizer = await anyio.to_thread.run_sync(AutoTokenizer.from_pretrained, str(tokenizer_dir))
    budget = config.episode.max_total_tokens
    kept: list[Any] = []
    dropped: list[str] = []
    for item in prepared:
        if only is not None and item.key not in only:
            kept.append(item)
            continue
        length = await perfect_episode_tokens(item, tokenizer, config)
        length = budget if length is None else length
        if length >= budget:
            dropped.append(f"{item.key}: its perfect episode is {length} tokens, the budget {budget}")
        else:
            kept.append(item)
    return kept, dropped


async def fitting_synthesized_tasks(
    envs: dict[str, Any],
    names: list[str],
    per_env: int,
    tokenizer_dir: Path,
    config: TrainerConfig,
    *,
    seed: int = 0,
    exclude: Sequence[Task] = (),
) -> tuple[list[Task], list[str]]:
    """`synthesized_tasks` that fit the token budget and repeat none of `exclude`'s reference calls.

    Returns the tasks and one line per task left out. An over-budget task teaches nothing (SFT
    skips it, every GRPO group on it scores 0); a task with the same calls as one in `exclude`
    would not be fresh (GRPO's tasks are meant to be ones the warm-up never saw).
    """
    seen = {reference_key(t) for t in exclude}
    tasks = await synthesized_tasks(envs, names, per_env, seed=seed)
    repeats = [t for t in tasks if reference_key(t) in seen]
    prepared, _ = await prepare_tasks(
        [t for t in tasks if reference_key(t) not in seen],
        envs,
        system_prompt=config.system_prompt,
        tool_subset=config.tool_subset,
    )
    try:
        fitting, too_long = await within_budget(prepared, tokenizer_dir, config)
    finally:
        for item in prepared:  # the trainer prepares its own copies
            if item.expected_state is not None:
                item.expected_state.close()
    left_out = too_long + [f"{t.full_id}: same reference calls as a warm-up task" for t in repeats]
    return [p.task for p in fitting], left_out
