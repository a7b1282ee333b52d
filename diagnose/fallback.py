"""The deterministic diagnosis: statistics only, used whenever the agent's report cannot be.

An environment's score is the lower bound of the Wilson 95% interval of its *severity-weighted*
failure rate: each failed episode counts with the severity of its primary failure category
(a simulator fault barely counts, corrupting the state counts fully). The lower bound makes an
environment with 1 failure out of 1 rank below one with 8 out of 10. Patterns group failed
episodes by (environment, primary category); guidelines aim at the tools the failures implicate.
"""

from __future__ import annotations

from collections import Counter, defaultdict

from arena.difficulty import Difficulty
from arena.synth.targeted import Guideline
from diagnose.evidence import EpisodeRecord, Evidence, wilson_interval
from diagnose.motifs import env_motif, weak_motifs
from diagnose.report import DiagnosisReport, FailurePattern, RankedEnv
from diagnose.taxonomy import DESCRIPTIONS, SEVERITY, FailureCategory

# What each failure suggests practising, and the knob levels that make tasks exercise it.
SKILLS: dict[FailureCategory, tuple[str, dict[str, int]]] = {
    "format_error": ("emit well-formed tool calls in the required format", {}),
    "unknown_tool": ("choose only among the tools the environment offers", {"distractors": 1}),
    "invalid_arguments": ("fill tool arguments exactly as the schema asks", {}),
    "tool_error_ignored": ("read tool errors and recover (fix the call or tell the user)", {}),
    "ungrounded_write": (
        "look up every record a write names instead of writing ids from memory",
        {"walk_length": 2},
    ),
    "wrong_entity": ("resolve which record the user means before acting on it", {"ambiguity": 1}),
    "missing_write": ("carry the task through to the state change it requires", {"walk_length": 2}),
    "extra_write": ("change only what the user asked for", {}),
    "wrong_answer": ("report the requested values from tool results in the answer", {}),
    "gave_up_early": ("keep calling tools until the whole request is done", {"walk_length": 2}),
    "max_turns": ("reach the goal in few, purposeful calls", {}),
    "simulator_fault": ("(environment fault; nothing to practise)", {}),
    "other": ("satisfy every check of the task", {}),
}


def env_score(weighted_failures: float, attempts: int) -> float:
    """Lower Wilson bound of the severity-weighted failure rate."""
    return wilson_interval(weighted_failures, attempts)[0]


def _patterns(evidence: Evidence, max_patterns: int, examples: int) -> list[FailurePattern]:
    groups: dict[tuple[str, FailureCategory], list[EpisodeRecord]] = defaultdict(list)
    for rec in evidence.episodes:
        if rec.failure is not None:
            groups[(rec.env, rec.failure)].append(rec)
    ordered = sorted(groups.items(), key=lambda kv: (-len(kv[1]) * SEVERITY[kv[0][1]], kv[0]))
    out = []
    for (env, cat), recs in ordered[:max_patterns]:
        known = set(evidence.envs_meta[env].tools) if env in evidence.envs_meta else set()
        tools = [t for t, _ in Counter(t for r in recs for t in r.failure_tools if t in known).most_common(3)]
        detail = Counter(r.failure_detail for r in recs).most_common(1)[0][0]
        out.append(
            FailurePattern(
                category=cat,
                env=env,
                description=f"{DESCRIPTIONS[cat]} in {len(recs)} episode(s); e.g. {detail}"[:400],
                tools=tools,
                episode_ids=[r.episode_id for r in recs[:examples]],
            )
        )
    return out


def target_tools(evidence: Evidence, env: str, limit: int = 3) -> list[str]:
    """The tools an environment's failures implicate most, then those with most failed calls."""
    meta = evidence.envs_meta.get(env)
    known = set(meta.tools) if meta else set()
    counts: Counter[str] = Counter()
    for rec in evidence.episodes:
        if rec.env == env and rec.failure is not None:
            counts.update(t for t in rec.failure_tools if t in known)
    stats = evidence.env_stats(env)
    if stats is not None:
        for tool, c in stats.calls.items():
            if tool in known and c.failed:
                counts[tool] += c.failed / 100  # a tie-breaker below any implication
    tools = [t for t, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]]
    if not tools and meta is not None:
        # Nothing implicated (e.g. wrong answers only): practise the environment's write tools.
        tools = (meta.write_tools or meta.tools)[:limit]
    return tools


def _guideline(
    evidence: Evidence, env: str, base: Difficulty, n_tasks: int, motif: str | None = None
) -> Guideline:
    cats = Counter(r.failure for r in evidence.episodes if r.env == env and r.failure is not None)
    top: FailureCategory = cats.most_common(1)[0][0] if cats else "other"
    skill, knobs = SKILLS[top]
    difficulty = base
    for knob, level in knobs.items():
        if difficulty.level(knob) < level:  # type: ignore[arg-type]
            difficulty = difficulty.with_level(knob, level)  # type: ignore[arg-type]
    return Guideline(
        env=env,
        failure_pattern=f"{DESCRIPTIONS[top]} ({cats[top]} of {sum(cats.values())} failures)",
        target_tools=target_tools(evidence, env),
        skill=skill,
        motif=motif,
        difficulty=difficulty,
        n_tasks=n_tasks,
    )


def fallback_report(
    evidence: Evidence,
    *,
    reason: str,
    max_weak: int = 5,
    min_score: float = 0.02,
    n_tasks: int = 10,
    difficulties: dict[str, Difficulty] | None = None,
    max_patterns: int = 8,
    examples: int = 3,
) -> DiagnosisReport:
    """The statistical report; `reason` says why the agent's report was not used."""
    scored = []
    for g in evidence.envs:
        assert g.env is not None
        score = env_score(g.weighted_failures, g.attempts)
        if score >= min_score and g.attempts > g.passed:
            scored.append((score, g))
    scored.sort(key=lambda sg: (-sg[0], sg[1].pass_rate, sg[1].env))
    weak = []
    for i, (score, g) in enumerate(scored[:max_weak], start=1):
        fails = ", ".join(f"{k} {v}" for k, v in g.failures.items())
        weak.append(
            RankedEnv(
                env=g.env or "",
                score=round(score, 4),
                rank=i,
                pass_rate=g.pass_rate,
                attempts=g.attempts,
                evidence=(
                    f"{g.passed}/{g.attempts} passed (95% CI {g.pass_low:.2f}-{g.pass_high:.2f}), "
                    f"mean reward {g.mean_reward:.2f}; failures: {fails or 'none'}"
                ),
            )
        )
    difficulties = difficulties or {}
    ranked = weak_motifs(evidence)
    guidelines = [
        _guideline(
            evidence,
            w.env,
            difficulties.get(w.env, Difficulty()),
            n_tasks,
            env_motif(evidence, w.env, ranked),
        )
        for w in weak
    ]
    return DiagnosisReport(
        round=evidence.round,
        source="fallback",
        fallback_reason=reason,
        summary=(
            f"statistical ranking of {len(evidence.envs)} environment(s) over {evidence.overall.attempts} "
            f"episode(s); overall pass rate {evidence.overall.pass_rate:.2f}"
        ),
        weak_envs=weak,
        weak_motifs=ranked,
        patterns=_patterns(evidence, max_patterns, examples),
        guidelines=guidelines,
        overall_pass_rate=evidence.overall.pass_rate if evidence.overall.attempts else None,
        episodes=evidence.overall.attempts,
    )
