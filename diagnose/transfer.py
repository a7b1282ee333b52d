"""From a diagnosis of held-out environments to work on training environments, by motif.

The arena is held out and no two environments share a tool name, so a weakness moves to training
through what transfers: the report's weak motifs (statistics) and the motifs the agent or the
fallback named on each weak environment's guideline. `plan_transfer` maps every such motif onto
every training environment whose tools can exercise it (any category), and `motif_guidelines`
turns the mapping into targeted-synthesis guidelines. Weak environments and motifs whose pass
rate is not below `weak_threshold` are set aside (with the reason) instead of steering anything.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from arena.difficulty import Difficulty
from arena.synth.motifs import DESCRIPTIONS, MotifName, env_motif_tools, motif_difficulty
from arena.synth.targeted import Guideline
from diagnose.report import DiagnosisReport

# Failures that more, similar rows would make harder to get right (DB complexification helps).
SCALE_MOTIFS: frozenset[str] = frozenset({"non_key_lookup", "multi_constraint_filter", "aggregation"})
SCALE_CATEGORIES: frozenset[str] = frozenset({"wrong_entity"})


class MotifTarget(BaseModel):
    """A weak motif PLAN acts on, how much (0..1), and what the tasks should practise."""

    motif: MotifName
    weight: float = Field(ge=0.0, le=1.0)
    source: str  # "statistics" or the weak arena environment whose guideline named it
    skill: str = ""
    failure_pattern: str = ""


class TransferPlan(BaseModel):
    """What PLAN decided about the diagnosis, stored with its output for `arena report`."""

    targets: list[MotifTarget] = Field(default_factory=list)
    mapping: dict[str, list[str]] = Field(default_factory=dict)  # motif -> training envs that have it
    unmatched: list[str] = Field(default_factory=list)  # motifs no training environment has
    env_motif: dict[str, str] = Field(default_factory=dict)  # training env -> the motif it practises
    weakness: dict[str, float] = Field(default_factory=dict)  # training env -> weakness from motifs
    set_aside: list[str] = Field(default_factory=list)  # weak findings above weak_threshold, why


def weak_targets(
    report: DiagnosisReport | None, weak_threshold: float
) -> tuple[list[MotifTarget], list[str]]:
    """The motifs to act on, strongest first, and the findings set aside by `weak_threshold`."""
    if report is None:
        return [], []
    aside: list[str] = []
    out: dict[str, MotifTarget] = {}
    guides = {g.motif: g for g in report.guidelines if g.motif is not None}
    motifs = [w for w in report.weak_motifs if w.pass_rate < weak_threshold]
    aside += [
        f"motif {w.motif}: pass rate {w.pass_rate:.2f} is not below weak_threshold {weak_threshold}"
        for w in report.weak_motifs
        if w.pass_rate >= weak_threshold
    ]
    top = max((w.score for w in motifs), default=0.0) or 1.0
    for w in motifs:
        g = guides.get(w.motif)
        out[w.motif] = MotifTarget(
            motif=w.motif,
            weight=round(max(0.0, min(1.0, w.score / top)), 4),
            source="statistics",
            skill=g.skill if g else DESCRIPTIONS[w.motif],
            failure_pattern=g.failure_pattern if g else w.evidence,
        )
    weak = {w.env: w for w in report.weak_envs}
    env_top = max((w.score for w in report.weak_envs), default=0.0) or 1.0
    for g in report.guidelines:
        w = weak.get(g.env)
        if g.motif is None or g.motif in out or w is None:
            continue
        if w.pass_rate is not None and w.pass_rate >= weak_threshold:
            aside.append(
                f"env {g.env}: pass rate {w.pass_rate:.2f} is not below weak_threshold {weak_threshold}"
            )
            continue
        out[g.motif] = MotifTarget(
            motif=g.motif,
            weight=round(max(0.0, min(1.0, w.score / env_top)) or 0.5, 4),
            source=g.env,
            skill=g.skill or DESCRIPTIONS[g.motif],
            failure_pattern=g.failure_pattern,
        )
    return sorted(out.values(), key=lambda t: -t.weight), aside


def plan_transfer(
    report: DiagnosisReport | None, envs: dict[str, Any], training: list[str], weak_threshold: float
) -> TransferPlan:
    """Map the weak motifs onto the training environments whose tools can exercise them."""
    targets, aside = weak_targets(report, weak_threshold)
    plan = TransferPlan(targets=targets, set_aside=aside)
    tools = {name: env_motif_tools(envs[name]) for name in training}
    for t in targets:
        having = [name for name in training if t.motif in tools[name]]
        plan.mapping[t.motif] = having
        if not having:
            plan.unmatched.append(t.motif)
        for name in having:
            # Strongest motif first: an environment practises the weakest motif it can exercise.
            if name not in plan.env_motif:
                plan.env_motif[name] = t.motif
                plan.weakness[name] = t.weight
    return plan


def motif_guidelines(
    plan: TransferPlan,
    allocation: dict[str, int],
    difficulties: dict[str, Difficulty],
    envs: dict[str, Any],
    per_env: int,
) -> list[Guideline]:
    """One guideline per mapped training environment with a budget: up to `per_env` targeted tasks."""
    if per_env <= 0:
        return []
    targets = {t.motif: t for t in plan.targets}
    out: list[Guideline] = []
    for name, motif in sorted(plan.env_motif.items()):
        n = min(int(allocation.get(name, 0)), per_env)
        if n <= 0:
            continue
        t = targets[motif]  # type: ignore[index]
        out.append(
            Guideline(
                env=name,
                motif=t.motif,
                failure_pattern=t.failure_pattern[:400],
                skill=t.skill[:400],
                target_tools=env_motif_tools(envs[name]).get(t.motif, []),
                difficulty=motif_difficulty(t.motif, difficulties.get(name, Difficulty())),
                n_tasks=n,
            )
        )
    return out


def complexify_candidates(
    report: DiagnosisReport | None, plan: TransferPlan, envs: dict[str, Any], training: list[str]
) -> list[tuple[str, str]]:
    """(training env, why) whose database should grow: the diagnosis points at scale or ambiguity.

    A weak motif of scale (lookups, filters, lists over many similar rows) or wrong-entity failures
    grow the training sibling (same top category) of the weak arena environment, else a training
    environment the motif was mapped onto.
    """
    if report is None:
        return []
    out: list[tuple[str, str]] = []
    executable = [n for n in training if envs[n].kind == "executable"]

    def top(name: str) -> str:
        category = getattr(envs.get(name), "category", None) or ["Uncategorized"]
        return category[0]

    for p in report.patterns:
        if p.category in SCALE_CATEGORIES and p.env in envs:
            siblings = [n for n in executable if top(n) == top(p.env)]
            out += [(n, f"{p.category} failures in {p.env} (same category)") for n in siblings[:1]]
    for t in plan.targets:
        if t.motif in SCALE_MOTIFS:
            out += [(n, f"weak motif {t.motif}") for n in plan.mapping.get(t.motif, [])[:1]]
    seen: set[str] = set()
    return [(n, why) for n, why in out if not (n in seen or seen.add(n))]  # type: ignore[func-returns-value]
