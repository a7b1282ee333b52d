"""Where no training environment fits the diagnosis: ask for a new one near the weak environment.

Motif transfer (`diagnose.transfer`) moves a weakness onto training environments that have the
motif, and category weight onto those sharing the weak environment's top-level category. When a
weak arena environment's category has no trainable environment, or a weak motif no training
environment can exercise, nothing the daemon trains on resembles the failure. PLAN then asks
SYNTHESIZE for a new environment (`arena.synth.envgen`) with a theme near the weak one: the same
category and kind of business, its own data, tools that exercise the weak motifs. The held-out
environment itself is never copied: the theme carries its category and a short description only.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from arena.synth.motifs import DESCRIPTIONS
from diagnose.report import DiagnosisReport
from diagnose.transfer import TransferPlan

THEME_DESCRIPTION_CHARS = 240


class NewEnvRequest(BaseModel):
    """One environment PLAN asks SYNTHESIZE to build, and why."""

    near: str = Field(description="The weak arena environment the theme is drawn from.")
    category: list[str] = Field(min_length=1)
    motifs: list[str] = Field(default_factory=list, description="Weak motifs its tasks should practise.")
    why: str
    theme: str


def _top(env: Any) -> str:
    category = getattr(env, "category", None) or ["Uncategorized"]
    return category[0]


def theme_near(env: Any, motifs: list[str]) -> str:
    """A theme for a new environment in `env`'s area whose tools exercise `motifs`."""
    category = " / ".join(getattr(env, "category", None) or ["Uncategorized"])
    description = " ".join(str(getattr(env, "description", "")).split())[:THEME_DESCRIPTION_CHARS]
    theme = (
        f"a different business in the {category} area, with its own data and users "
        f"(for comparison, another app in this area: {description})"
    )
    if motifs:
        practise = "; ".join(DESCRIPTIONS[m] for m in motifs if m in DESCRIPTIONS)  # type: ignore[index]
        theme += f". Its tools must let an assistant practise: {practise}"
    return theme[:500]


def new_env_requests(
    report: DiagnosisReport | None,
    envs: dict[str, Any],
    trainable: list[str],
    plan: TransferPlan,
    weak_threshold: float,
    limit: int,
    skip_categories: set[str] | frozenset[str] = frozenset(),
) -> list[NewEnvRequest]:
    """Up to `limit` environments to build, weakest first.

    A weak arena environment (pass rate below `weak_threshold`) whose top-level category has no
    trainable environment gets one in its category; motifs no training environment can exercise
    (`plan.unmatched`) ride on the first request, or ask for one near the weakest environment.
    `skip_categories` are categories a recent attempt failed for (retrying every round would
    spend the helper on the same failure).
    """
    if report is None or limit <= 0:
        return []
    covered = {_top(envs[n]) for n in trainable if n in envs}
    named = {g.env: g.motif for g in report.guidelines if g.motif is not None}
    weak = [
        w
        for w in sorted(report.weak_envs, key=lambda w: w.rank)
        if w.env in envs and (w.pass_rate is None or w.pass_rate < weak_threshold)
    ]
    out: list[NewEnvRequest] = []
    asked: set[str] = set()
    unmatched = list(plan.unmatched)
    for w in weak:
        category = _top(envs[w.env])
        if category in covered or category in asked or category in skip_categories:
            continue
        motifs = sorted({*unmatched, *([named[w.env]] if w.env in named else [])})
        why = f"no trainable environment in category {category} (weak: {w.env})"
        if unmatched:
            why += f"; no training environment exercises {', '.join(unmatched)}"
            unmatched = []
        out.append(_request(envs[w.env], w.env, motifs, why))
        asked.add(category)
    if unmatched and weak:
        # Every weak category is covered, yet a motif has nowhere to be practised.
        w = weak[0]
        why = f"no training environment exercises {', '.join(unmatched)}"
        if _top(envs[w.env]) not in skip_categories:
            out.append(_request(envs[w.env], w.env, sorted(unmatched), why))
    return out[:limit]


def _request(env: Any, near: str, motifs: list[str], why: str) -> NewEnvRequest:
    return NewEnvRequest(
        near=near,
        category=list(getattr(env, "category", None) or ["Uncategorized"]),
        motifs=motifs,
        why=why,
        theme=theme_near(env, motifs),
    )
