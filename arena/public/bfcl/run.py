"""Choosing entries, playing them and scoring them: what `arena bench bfcl` and the daemon share.

`sample` picks a fixed, seeded set of entries per category (the same for the same seed, size and
import, whatever else changed); `play` runs one entry with a policy and scores it; `score_file`
reads trajectories in BFCL's decoded form from a result file of another harness.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from arena.env.object_runtime import ObjectRunner
from arena.protocols import ChatModel
from arena.public.bfcl.checker import Verdict, fail, score
from arena.public.bfcl.dist import CATEGORIES
from arena.public.bfcl.episode import EntryRun, EpisodeLimits, run_entry
from arena.public.bfcl.model import BfclBenchmark, BfclEntry
from arena.sandbox.models import SandboxProgramError, SandboxViolation


class EntryResult(BaseModel):
    """One scored entry; `run` is None when the trajectory came from a file."""

    verdict: Verdict
    run: EntryRun | None = None


def check_categories(names: Sequence[str]) -> list[str]:
    """The categories asked for, in BFCL's order; `ValueError` naming an unknown one."""
    unknown = [n for n in names if n not in CATEGORIES]
    if unknown:
        raise ValueError(f"unknown BFCL categories {unknown} (known: {', '.join(CATEGORIES)})")
    return [c for c in CATEGORIES if c in names]


def sample(bench: BfclBenchmark, categories: Sequence[str], limit: int | None, seed: int) -> list[BfclEntry]:
    """`limit` entries per category (all: None), ordered by a hash of the seed and the entry id.

    A hash per entry rather than a shuffle: the sample of a category does not depend on which
    other categories are asked for, and a larger `limit` keeps the smaller one's entries.
    """
    out: list[BfclEntry] = []
    for cat in check_categories(categories):
        entries = bench.entries.get(cat, [])
        if limit is not None:
            ranked = sorted(entries, key=lambda e: hashlib.sha256(f"{seed}:{e.id}".encode()).hexdigest())
            keep = {e.id for e in ranked[:limit]}
            entries = [e for e in entries if e.id in keep]
        out += entries
    return out


async def play(
    policy: ChatModel,
    bench: BfclBenchmark,
    entry: BfclEntry,
    runner: ObjectRunner,
    limits: EpisodeLimits | None = None,
    *,
    irrelevance: bool = True,
) -> EntryResult:
    """Play `entry` with `policy` and score the trajectory."""
    run = await run_entry(policy, bench, entry, runner, limits)
    if run.finish == "model_error":
        verdict = fail(entry, "inference_error", len(run.decoded), run.detail)
    elif run.finish == "env_error":
        verdict = fail(entry, "execution_limit", len(run.decoded), run.detail)
    else:
        verdict = await score_safely(entry, run.decoded, runner, irrelevance=irrelevance)
    return EntryResult(verdict=verdict, run=run)


async def score_safely(
    entry: BfclEntry, decoded: list[list[list[str]]], runner: ObjectRunner, *, irrelevance: bool = True
) -> Verdict:
    """`score`, with a sandbox limit the replayed calls break as a failed entry, not an error."""
    try:
        return await score(entry, decoded, runner, irrelevance=irrelevance)
    except (SandboxViolation, SandboxProgramError) as exc:  # the trajectory's calls did it
        return fail(entry, "execution_limit", None, f"{type(exc).__name__}: {exc}")


def read_result_file(path: Path) -> dict[str, list[list[list[str]]]]:
    """Decoded trajectories by entry id, from JSON lines or one JSON list of `{"id", "result"}`.

    `result` is BFCL's decoded form: per turn, per step, call expressions. Raises `ValueError`
    naming the line or entry that does not have that shape.
    """
    text = Path(path).read_text(encoding="utf-8")
    stripped = text.lstrip()
    try:
        rows: list[Any] = (
            json.loads(text)
            if stripped.startswith("[")
            else [json.loads(line) for line in text.splitlines() if line.strip()]
        )
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not JSON lines or a JSON list ({exc})") from None
    out: dict[str, list[list[list[str]]]] = {}
    for number, row in enumerate(rows, start=1):
        result = row.get("result") if isinstance(row, dict) else None
        ok = isinstance(result, list) and all(
            isinstance(turn, list)
            and all(isinstance(step, list) and all(isinstance(c, str) for c in step) for step in turn)
            for turn in result
        )
        if not ok or not isinstance(row.get("id"), str):
            raise ValueError(
                f'{path}: record {number} is not {{"id": ..., "result": [[["call(...)", ...], ...], ...]}} '
                "(BFCL's decoded form: per turn, per step, call strings)"
            )
        out[row["id"]] = result
    return out


async def score_file(
    bench: BfclBenchmark,
    trajectories: dict[str, list[list[list[str]]]],
    entries: Sequence[BfclEntry],
    runner: ObjectRunner,
    *,
    irrelevance: bool = True,
) -> list[EntryResult]:
    """Score the given entries' trajectories; an entry the file lacks fails as never played."""
    out = []
    for entry in entries:
        if entry.id not in trajectories:
            verdict = fail(entry, "inference_error", 0, "not in the result file")
        else:
            verdict = await score_safely(entry, trajectories[entry.id], runner, irrelevance=irrelevance)
        out.append(EntryResult(verdict=verdict))
    return out
