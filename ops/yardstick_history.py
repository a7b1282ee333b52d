"""The yardstick by round: where operators see whether the loop makes the policy better.

Each round's live policy (EVALUATE's) ran the same fixed tasks greedily, so rounds compare task by
task: the change from the first round and from the previous one are paired bootstrap intervals
over the tasks both ran (`ops.phases.yardstick_scores.paired_change`), far narrower than two
rates' intervals side by side. Within a round, the policy after the warm-up (when TRAIN measured
it: `round.yardstick_after_warmup`) and the candidate PUBLISH measured split the round's change
into the warm-up's share and GRPO's. A round that warmed up without measuring the warmed-up
policy (the daemon's TRAIN does not; `arena bench learn` does) has only its training's share,
warm-up and GRPO together: it is never reported as GRPO's. `arena report`, `arena status`, the
`arena_yardstick_change` gauges and `arena bench learn` all read it from here, and each record
lists every task's outcome so anyone can recompute a comparison.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from pydantic import BaseModel, Field
from sqlmodel.ext.asyncio.session import AsyncSession

from arena.store import repo_yardstick
from ops.phases.yardstick_scores import PairedChange, Score, paired_change, score

# The stages a round's yardstick is measured at: EVALUATE's live policy, TRAIN's warm-up, PUBLISH's candidate.
STAGES = ("live", "warmup", "candidate")


class RoundYardstick(BaseModel):
    """One round's yardstick: the live policy's score, its changes, and the round's own stages."""

    round: int
    policy: str
    score: Score
    since_first: PairedChange | None = None
    since_previous: PairedChange | None = None
    # Within the round: after the SFT warm-up (measured by TRAIN), and the candidate (PUBLISH).
    warmup: Score | None = None
    warmup_change: PairedChange | None = None  # warm-up − live
    candidate: Score | None = None
    grpo_change: PairedChange | None = None  # candidate − (warm-up, else live without a warm-up)
    training_change: PairedChange | None = None  # candidate − live: the round's whole training
    outcomes: dict[str, bool] = Field(default_factory=dict)  # task id → passed (live)


def _score(runs: Sequence[Any]) -> Score | None:
    return score(sum(int(r.passed) for r in runs), len(runs)) if runs else None


def build_history(
    stages: dict[int, dict[str, Sequence[Any]]], warmed_up: Collection[int] = ()
) -> list[RoundYardstick]:
    """The records of rounds whose live runs are in `stages` (round → stage → runs), oldest first;
    `warmed_up`: the rounds whose TRAIN ran an SFT warm-up before GRPO."""
    out: list[RoundYardstick] = []
    first: Sequence[Any] | None = None
    previous: Sequence[Any] | None = None
    for round_no in sorted(stages):
        live = stages[round_no].get("live") or []
        if not live:
            continue
        warm = stages[round_no].get("warmup") or []
        cand = stages[round_no].get("candidate") or []
        # GRPO's share needs the policy GRPO started from: the measured warm-up, or the live
        # policy when there was no warm-up. Otherwise the change is the warm-up's and GRPO's.
        grpo_start = warm or (live if round_no not in warmed_up else None)
        record = RoundYardstick(
            round=round_no,
            policy=str(live[0].policy),
            score=_score(live),  # type: ignore[arg-type]
            since_first=paired_change(first, live) if first is not None else None,
            since_previous=paired_change(previous, live) if previous is not None else None,
            warmup=_score(warm),
            warmup_change=paired_change(live, warm) if warm else None,
            candidate=_score(cand),
            grpo_change=paired_change(grpo_start, cand) if cand and grpo_start else None,
            training_change=paired_change(live, cand) if cand else None,
            outcomes={r.task_id: bool(r.passed) for r in live},
        )
        out.append(record)
        first = first if first is not None else live
        previous = live
    return out


async def _runs_by_stage(session: AsyncSession, rounds: Sequence[int]) -> dict[int, dict[str, Sequence[Any]]]:
    """Round → stage (live, warm-up, candidate) → its stored runs, for `rounds`."""
    return {r: {stage: await repo_yardstick.runs(session, r, stage) for stage in STAGES} for r in rounds}


async def read_history(session: AsyncSession, warmed_up: Collection[int] = ()) -> list[RoundYardstick]:
    """Every stored round's yardstick record (`warmed_up`: as `build_history`)."""
    rounds = await repo_yardstick.rounds_measured(session, "live")
    return build_history(await _runs_by_stage(session, rounds), warmed_up)


async def read_latest(session: AsyncSession) -> RoundYardstick | None:
    """The newest round's record, reading only the rounds it compares with (the first, the previous)."""
    rounds = await repo_yardstick.rounds_measured(session, "live")
    if not rounds:
        return None
    return build_history(await _runs_by_stage(session, sorted({rounds[0], *rounds[-2:]})))[-1]


def set_change_metrics(metrics: Any, latest: RoundYardstick) -> None:
    """`arena_yardstick_change{since,bound}`: the latest round's paired changes and their intervals."""
    for since, change in (("first", latest.since_first), ("previous", latest.since_previous)):
        if change is None:
            continue
        for bound, value in (("value", change.diff), ("low", change.low), ("high", change.high)):
            metrics.yardstick_change.labels(since=since, bound=bound).set(value)


def table(history: Sequence[RoundYardstick]) -> list[str]:
    """The yardstick by round as a compact terminal table."""
    lines = ["round  yardstick                        since round 1            since previous"]
    for h in history:
        first = _short(h.since_first)
        previous = _short(h.since_previous)
        lines.append(f"{h.round:>5}  {h.score.text():<32} {first:<24} {previous}")
    return lines


def _short(change: PairedChange | None) -> str:
    return "-" if change is None else f"{change.diff:+.2f} [{change.low:+.2f}, {change.high:+.2f}]"
