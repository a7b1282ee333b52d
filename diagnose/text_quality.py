"""Free text the diagnosis agent writes must read as text, or it is replaced by text from the evidence.

A small helper under a grammar fills every free-text field, and what fills it can be noise:
`"123456789012345678901234567890"` as evidence, `"mispirat_writ_wir_wir_wir"` as a pattern,
`"ski_sli_sli_sli"` as a skill. That text flows on into PLAN's guidelines, the targeted tasks'
guidance and `arena report`, where an operator reads it. So every free-text field of an agent's
report passes `readable` or is replaced by a sentence derived from the report's structured fields
(category, environment, tools, cited episodes) and the round's evidence, naming real episode ids:
"food_delivery: 3 of 4 episodes failed (missing_write 2, wrong_answer 1), e.g. food_delivery/t-1#0".
The structured fields themselves are already checked against the evidence (`validate_draft`).
"""

from __future__ import annotations

import re
import zlib
from collections import Counter

from diagnose.evidence import Evidence
from diagnose.report import DiagnosisReport, FailurePattern
from diagnose.taxonomy import DESCRIPTIONS

_WORD = re.compile(r"[A-Za-z]+")
_VOWEL = re.compile(r"[aeiouy]")
_TRIPLE = re.compile(r"(.)\1\1")
MIN_WORDS = 3


def readable(text: str) -> bool:
    """Whether `text` reads as a sentence: enough real words, mostly letters, no repetition.

    A real word has two or more letters, a vowel and no letter three times in a row; words must
    be at least half distinct, letters and spaces at least 60% of the characters, and a longer text
    must not compress below a third of its length (a repeated syllable does).
    """
    t = text.strip()
    if not t:
        return False
    words = [w.lower() for w in _WORD.findall(t)]
    real = [w for w in words if len(w) >= 2 and _VOWEL.search(w) and not _TRIPLE.search(w)]
    if len(real) < MIN_WORDS:
        return False
    if len(words) >= 6 and len(set(words)) * 2 < len(words):
        return False
    if sum(c.isalpha() or c == " " for c in t) < 0.6 * len(t):
        return False
    return len(t) < 48 or len(zlib.compress(t.encode())) * 3 >= len(t)


def _failed(evidence: Evidence, env: str) -> list[str]:
    return [e.episode_id for e in evidence.episodes if e.env == env and not e.passed]


def env_evidence(evidence: Evidence, env: str) -> str:
    """`ENV: k of n episodes failed (category count, ...), e.g. EPISODE`, from the round's evidence."""
    stats = evidence.env_stats(env)
    failed = _failed(evidence, env)
    if stats is None:
        return f"{env}: no episode this round"
    kinds = ", ".join(f"{k} {v}" for k, v in sorted(stats.failures.items(), key=lambda kv: (-kv[1], kv[0])))
    text = f"{env}: {stats.attempts - stats.passed} of {stats.attempts} episodes failed"
    text += f" ({kinds})" if kinds else ""
    return text + (f", e.g. {failed[0]}" if failed else "")


def pattern_description(evidence: Evidence, pattern: FailurePattern) -> str:
    """What the pattern's category means, where, with which tools, and what its episodes showed."""
    cited = [e for e in evidence.episodes if e.episode_id in set(pattern.episode_ids)]
    details = Counter(e.failure_detail for e in cited if e.failure_detail)
    text = f"{pattern.env}: {DESCRIPTIONS[pattern.category]}"
    if pattern.tools:
        text += f" ({', '.join(pattern.tools)})"
    text += f" in {', '.join(pattern.episode_ids)}"
    if details:
        text += f"; {details.most_common(1)[0][0]}"
    return text[:400]


def _top_category(evidence: Evidence, env: str) -> str:
    counts = Counter(e.failure for e in evidence.episodes if e.env == env and e.failure is not None)
    return counts.most_common(1)[0][0] if counts else "other"


def clean_report(report: DiagnosisReport, evidence: Evidence, skills: dict[str, str]) -> DiagnosisReport:
    """The report with every unreadable free-text field replaced by derived text.

    `skills` maps a failure category to the skill that practises it (the fallback's table). The
    names of the replaced fields go to `report.replaced_text`.
    """
    replaced: list[str] = []
    update = report.model_copy(deep=True)
    if not readable(update.summary):
        replaced.append("summary")
        weakest = ", ".join(w.env for w in update.weak_envs[:3]) or "none"
        update.summary = (
            f"{evidence.overall.passed} of {evidence.overall.attempts} episodes passed; "
            f"weakest environments: {weakest}"
        )
    for i, weak in enumerate(update.weak_envs):
        if not readable(weak.evidence):
            replaced.append(f"weak_envs[{i}].evidence")
            weak.evidence = env_evidence(evidence, weak.env)
    for i, pattern in enumerate(update.patterns):
        if not readable(pattern.description):
            replaced.append(f"patterns[{i}].description")
            pattern.description = pattern_description(evidence, pattern)
    for i, guideline in enumerate(update.guidelines):
        category = next((p.category for p in update.patterns if p.env == guideline.env), None)
        category = category or _top_category(evidence, guideline.env)
        if not readable(guideline.failure_pattern):
            replaced.append(f"guidelines[{i}].failure_pattern")
            guideline.failure_pattern = f"{guideline.env}: {DESCRIPTIONS[category]}"  # type: ignore[index]
        if not readable(guideline.skill):
            replaced.append(f"guidelines[{i}].skill")
            guideline.skill = skills[category]
    update.replaced_text = replaced
    return update
