"""Weak motifs: which shapes of work (`arena.synth.motifs`) the policy fails, from the evidence alone.

A motif is weak when the episodes whose tasks exercise it fail more than the episodes whose tasks
do not, beyond chance: its score is the lower bound of the Wilson 95% interval of its failure rate
minus the upper bound of the other episodes' (positive only when the two intervals part). The ranking is statistics, not the agent's opinion,
so both the agent's report and the fallback carry the same `weak_motifs`; the agent may in
addition name a motif on each guideline.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from arena.synth.motifs import DESCRIPTIONS, MotifName
from diagnose.evidence import Evidence, wilson_interval


class WeakMotif(BaseModel):
    """A motif the policy fails more on than elsewhere, with the figures behind it."""

    motif: MotifName
    score: float = Field(ge=-1.0, le=1.0)
    attempts: int
    passed: int
    pass_rate: float
    pass_low: float
    pass_high: float
    others_pass_rate: float | None = None  # episodes whose tasks do not exercise the motif
    envs: list[str] = Field(default_factory=list)  # where its failures were seen
    evidence: str = ""


def weak_motifs(evidence: Evidence, *, limit: int = 3) -> list[WeakMotif]:
    """Motifs whose failure rate is above the rest's beyond the interval, weakest first."""
    out: list[WeakMotif] = []
    records = evidence.episodes
    for group in evidence.motifs:
        motif = group.motif
        if motif not in DESCRIPTIONS or group.attempts == 0 or group.passed == group.attempts:
            continue
        others = [r for r in records if motif not in r.motifs]
        other_failed = sum(not r.passed for r in others)
        other_fail = other_failed / len(others) if others else 0.0
        # Both intervals must part: the motif's failure rate is above the others' beyond chance.
        other_high = wilson_interval(other_failed, len(others))[1] if others else 0.0
        fail_low = wilson_interval(group.attempts - group.passed, group.attempts)[0]
        score = round(fail_low - other_high, 4)
        if score <= 0:
            continue
        envs = sorted({r.env for r in records if motif in r.motifs and not r.passed})
        others_rate = 1.0 - other_fail if others else None
        out.append(
            WeakMotif(
                motif=motif,  # type: ignore[arg-type]
                score=score,
                attempts=group.attempts,
                passed=group.passed,
                pass_rate=group.pass_rate,
                pass_low=group.pass_low,
                pass_high=group.pass_high,
                others_pass_rate=others_rate,
                envs=envs,
                evidence=(
                    f"{DESCRIPTIONS[motif]}: {group.passed}/{group.attempts} passed "  # type: ignore[index]
                    f"(95% CI {group.pass_low:.2f}-{group.pass_high:.2f})"
                    + (f" against {others_rate:.2f} without it" if others_rate is not None else "")
                    + f"; failures in {', '.join(envs)}"
                ),
            )
        )
    out.sort(key=lambda w: (-w.score, w.motif))
    return out[:limit]


def env_motif(evidence: Evidence, env: str, ranked: list[WeakMotif]) -> MotifName | None:
    """The weak motif that explains most of an environment's failures (None if none does)."""
    failed = [r for r in evidence.episodes if r.env == env and not r.passed]
    best: tuple[int, float, MotifName] | None = None
    for w in ranked:
        hits = sum(w.motif in r.motifs for r in failed)
        if hits and (best is None or (hits, w.score) > best[:2]):
            best = (hits, w.score, w.motif)
    return best[2] if best else None
