"""Failure traces compacted to a token budget for the diagnosis prompt.

What must survive is what explains the failure: the instruction, every failing call with its error
(and every malformed call), the failed checks and the final answer. Successful calls are context:
they are added in episode order while the budget lasts, with their outputs cut short. Lines keep
their episode order so the trace still reads as a story.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from diagnose.evidence import EpisodeInput, EpisodeRecord

TokenCounter = Callable[[str], int]


def approx_tokens(text: str) -> int:
    """A tokenizer-free estimate (about four characters per token for English and JSON)."""
    return (len(text) + 3) // 4


def _short(value: Any, chars: int) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    text = " ".join(text.split())
    return text if len(text) <= chars else text[: max(0, chars - 3)] + "..."


def compact_trace(
    ep: EpisodeInput,
    record: EpisodeRecord,
    *,
    budget_tokens: int = 400,
    count: TokenCounter = approx_tokens,
) -> str:
    """One failed episode as a few lines that fit `budget_tokens` (as counted by `count`)."""
    tr = ep.transcript
    chars = max(40, budget_tokens * 4)  # per-item cap before the budget loop trims further
    header = (
        f"episode {record.episode_id} | env {record.env} | task {record.task_id} | finish {record.finish}"
        f" | reward {record.reward:.2f} | failure {record.failure}: {record.failure_detail}"
    )
    essential: list[tuple[float, str]] = [
        (-2, header),
        (-1, "instruction: " + _short(ep.task.instruction, chars // 3)),
    ]
    optional: list[tuple[float, str]] = []
    for i, c in enumerate(tr.calls):
        args = _short(c.call.arguments, 160)
        if c.result.ok:
            optional.append(
                (c.turn + i / 1000, f"t{c.turn} ok {c.call.name}({args}) -> {_short(c.result.output, 120)}")
            )
        else:
            kind = c.result.error_kind or "error"
            essential.append(
                (
                    c.turn + i / 1000,
                    f"t{c.turn} FAIL {c.call.name}({args}) -> {kind}: {_short(c.result.error, 200)}",
                )
            )
    for m in tr.malformed_errors:
        essential.append(
            (m.turn + 0.0005, f"t{m.turn} MALFORMED {m.error.kind}: {_short(m.error.message, 160)}")
        )
    failed = [f"{c.name or c.kind} ({_short(c.detail, 120)})" for c in ep.verdict.checks if not c.passed]
    if failed:
        essential.append((1e6, "failed checks: " + "; ".join(failed)))
    essential.append(
        (1e6 + 1, "answer: " + (_short(tr.final_answer, chars // 3) if tr.final_answer else "(none)"))
    )

    lines = _fit(essential, budget_tokens, count)
    used = sum(count(text) + 1 for _, text in lines)
    for item in optional:
        cost = count(item[1]) + 1
        if used + cost > budget_tokens:
            break
        lines.append(item)
        used += cost
    return "\n".join(text for _, text in sorted(lines, key=lambda x: x[0]))


def _fit(items: list[tuple[float, str]], budget: int, count: TokenCounter) -> list[tuple[float, str]]:
    """Shorten the longest lines until the essentials fit (the header and failing calls stay)."""
    items = list(items)
    for _ in range(64):
        total = sum(count(text) + 1 for _, text in items)
        if total <= budget:
            break
        i = max(range(len(items)), key=lambda k: len(items[k][1]))
        pos, text = items[i]
        if len(text) <= 60:
            # Nothing long left: drop the middle failing calls (keep the first and the last ones).
            middle = [k for k in range(2, len(items) - 2) if items[k][0] < 1e6]
            if not middle:
                break
            items.pop(middle[len(middle) // 2])
            continue
        items[i] = (pos, text[: max(57, int(len(text) * 0.7)) - 3] + "...")
    return items
