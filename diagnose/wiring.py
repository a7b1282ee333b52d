"""From the store to a report, and from a report to the curriculum and to synthesis.

- `load_episode_inputs`: a round's evaluation episodes (transcript, verdict, task) from the store;
- `save_report` / `load_report`: the `diagnosis_reports` row of a round;
- `weakness_from_report` / `apply_weakness`: per-environment weakness in [0, 1] for
  `curriculum.sampling.EnvCandidate.weakness`;
- `synthesis_requests`: the report's guidelines as the `Guideline`s targeted synthesis consumes,
  sized by the curriculum's allocation.
"""

from __future__ import annotations

from typing import Any

import structlog
from pydantic import ValidationError
from sqlmodel.ext.asyncio.session import AsyncSession

from arena.difficulty import Difficulty
from arena.episode.transcript import Transcript
from arena.store import repo
from arena.synth.targeted import Guideline
from arena.tasks.model import Task
from arena.tasks.reward import Verdict
from curriculum.sampling import Allocation, EnvCandidate
from diagnose.evidence import EpisodeInput
from diagnose.report import DiagnosisReport

log = structlog.get_logger(__name__)


def episode_id(env: str, task_id: str, sample_idx: int) -> str:
    """The id the diagnosis uses for an episode: `ENV/TASK#SAMPLE` (unique within a round).

    Stored task ids already are `ENV/ID`; the environment is added only to a bare id.
    """
    full = task_id if task_id.startswith(f"{env}/") else f"{env}/{task_id}"
    return f"{full}#{sample_idx}"


async def load_episode_inputs(
    session: AsyncSession, round_no: int, purpose: str = "eval"
) -> list[EpisodeInput]:
    """A round's episodes with their tasks; rows that do not parse are skipped (and logged)."""
    rows = await repo.episodes_for_round(session, round_no, purpose=purpose)
    tasks: dict[str, Task | None] = {}
    out: list[EpisodeInput] = []
    for row in rows:
        if row.task_id not in tasks:
            task_row = await repo.get_task(session, row.task_id)
            try:
                tasks[row.task_id] = Task.model_validate(task_row.data) if task_row is not None else None
            except ValidationError:
                tasks[row.task_id] = None
        task = tasks[row.task_id]
        if task is None:
            log.warning("diagnosis_episode_skipped", task=row.task_id, reason="task not stored or invalid")
            continue
        try:
            transcript = Transcript.model_validate(row.transcript)
            verdict = Verdict.model_validate(row.verdict)
        except ValidationError as exc:
            log.warning("diagnosis_episode_skipped", task=row.task_id, reason=str(exc)[:200])
            continue
        out.append(
            EpisodeInput(
                episode_id=episode_id(row.env, row.task_id, row.sample_idx),
                env=row.env,
                task=task,
                transcript=transcript,
                verdict=verdict,
            )
        )
    return out


async def save_report(session: AsyncSession, report: DiagnosisReport) -> None:
    """Store (or replace) the round's report."""
    await repo.save_diagnosis(session, report.round, report.source, report.model_dump(mode="json"))


async def load_report(session: AsyncSession, round_no: int) -> DiagnosisReport | None:
    """A round's stored report, or None. A stored report that no longer parses raises ValueError."""
    row = await repo.get_diagnosis(session, round_no)
    if row is None:
        return None
    try:
        return DiagnosisReport.model_validate(row.report)
    except ValidationError as exc:
        raise ValueError(
            f"the stored diagnosis of round {round_no} does not parse: {exc.errors()[0]['msg']}"
        ) from None


def weakness_from_report(report: DiagnosisReport) -> dict[str, float]:
    """Weakness in [0, 1] per weak environment: its score relative to the weakest one.

    Scores of the agent and of the fallback live on different scales (the fallback's is a lower
    confidence bound, often well below 1), so the weakest environment gets 1.0 and the others keep
    their ratio to it; environments the report does not name are not weak (0).
    """
    top = max((w.score for w in report.weak_envs), default=0.0)
    if top <= 0:
        # All scores zero: fall back to rank order, weakest 1.0, decreasing.
        n = len(report.weak_envs)
        return {w.env: (n - w.rank + 1) / n for w in report.weak_envs}
    return {w.env: round(min(1.0, w.score / top), 4) for w in report.weak_envs}


def apply_weakness(candidates: list[EnvCandidate], report: DiagnosisReport | None) -> list[EnvCandidate]:
    """The candidates with `weakness` set from the report (unchanged without one)."""
    if report is None:
        return list(candidates)
    weakness = weakness_from_report(report)
    return [c.model_copy(update={"weakness": weakness.get(c.name, 0.0)}) for c in candidates]


def synthesis_requests(
    report: DiagnosisReport,
    *,
    allocation: Allocation | None = None,
    difficulties: dict[str, Difficulty] | None = None,
    known_envs: Any = None,
) -> list[Guideline]:
    """One `Guideline` per weak environment, ready for targeted synthesis.

    With an `allocation`, `n_tasks` is the environment's planned task count (environments the
    plan gives nothing are dropped); with `difficulties` (the curriculum's, which owns difficulty),
    each guideline's knobs are at least the curriculum's levels. `known_envs` (names) drops
    guidelines for environments no longer registered.
    """
    out: list[Guideline] = []
    seen: set[str] = set()
    for g in report.guidelines:
        if g.env in seen or (known_envs is not None and g.env not in known_envs):
            continue
        seen.add(g.env)
        update: dict[str, Any] = {}
        if allocation is not None:
            n = int(allocation.tasks.get(g.env, 0))
            if n <= 0:
                continue
            update["n_tasks"] = n
        if difficulties and g.env in difficulties:
            base = difficulties[g.env]
            merged = g.difficulty
            for knob, level in base.as_dict().items():
                if merged.level(knob) < level:  # type: ignore[arg-type]
                    merged = merged.with_level(knob, level)  # type: ignore[arg-type]
            update["difficulty"] = merged
        out.append(g.model_copy(update=update))
    return out
