"""The diagnosis report: its schema, the JSON schema the agent answers in, and validation.

The agent answers with a `DiagnosisDraft`, flat or nested (each weak environment holding its
pattern and guideline: the form its grammar-constrained answer takes, see `draft_schema`);
`validate_draft` checks it against the evidence
(environments, tools and episode ids must exist, patterns must cite failed episodes of their own
environment, every weak environment needs a guideline and every guideline a weak environment)
and `ReportInvalid` lists every problem. A valid draft, or the fallback's own, becomes a
`DiagnosisReport` (`source` says which, `fallback_reason` why the agent's was not used).
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from arena.difficulty import KNOBS
from arena.synth.motifs import MOTIFS, MotifName
from arena.synth.targeted import Guideline
from diagnose.evidence import Evidence
from diagnose.motifs import WeakMotif
from diagnose.taxonomy import CATEGORIES, FailureCategory


class ReportInvalid(ValueError):
    """The agent's report does not hold up; `problems` says why, one line each."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__(
            "; ".join(problems[:5]) + (f" (+{len(problems) - 5} more)" if len(problems) > 5 else "")
        )
        self.problems = problems


class WeakEnv(BaseModel):
    """One weak environment: how weak (0..1, higher is weaker) and the evidence in words."""

    model_config = ConfigDict(extra="forbid")

    env: str = Field(min_length=1)
    score: float = Field(ge=0.0, le=1.0)
    evidence: str = ""


class RankedEnv(WeakEnv):
    """A weak environment with its rank (1 = weakest) and its measured pass rate."""

    rank: int = Field(ge=1)
    pass_rate: float | None = None
    attempts: int = 0


class FailurePattern(BaseModel):
    """A recurring failure: its category, where, which tools, and episodes that show it."""

    model_config = ConfigDict(extra="forbid")

    category: FailureCategory
    env: str = Field(min_length=1)
    description: str = Field(min_length=1)
    tools: list[str] = Field(default_factory=list)
    episode_ids: list[str] = Field(min_length=1)
    motif: MotifName | None = None

    @field_validator("tools", "episode_ids")
    @classmethod
    def _once_each(cls, items: list[str]) -> list[str]:
        # The agent's constrained answer may name one tool or episode three times (seen with the
        # 135M helper): the report and the text derived from it name each once.
        return list(dict.fromkeys(items))


class DiagnosisDraft(BaseModel):
    """What the agent must answer with."""

    model_config = ConfigDict(extra="forbid")

    summary: str = ""
    weak_envs: list[WeakEnv]
    patterns: list[FailurePattern] = Field(default_factory=list)
    guidelines: list[Guideline] = Field(default_factory=list)


class AgentUsage(BaseModel):
    """What the diagnosis agent spent."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    python_runs: int = 0
    python_errors: int = 0

    @property
    def tokens(self) -> int:
        """Prompt and completion tokens together."""
        return self.prompt_tokens + self.completion_tokens


class DiagnosisReport(BaseModel):
    """A round's diagnosis, as stored in `diagnosis_reports.report`."""

    round: int
    source: Literal["agent", "fallback"]
    fallback_reason: str | None = None
    summary: str = ""
    weak_envs: list[RankedEnv] = Field(default_factory=list)
    # From the evidence's statistics (both sources): what transfers to training environments.
    weak_motifs: list[WeakMotif] = Field(default_factory=list)
    patterns: list[FailurePattern] = Field(default_factory=list)
    guidelines: list[Guideline] = Field(default_factory=list)
    usage: AgentUsage = Field(default_factory=AgentUsage)
    # The agent's free-text fields that did not read as text and were derived from the evidence
    # instead (`diagnose.text_quality`), e.g. "patterns[0].description".
    replaced_text: list[str] = Field(default_factory=list)
    overall_pass_rate: float | None = None
    episodes: int = 0

    @property
    def weak(self) -> list[str]:
        """The weak environments, weakest first."""
        return [w.env for w in self.weak_envs]


# Characters of one weak environment's JSON structure at most (keys, enums, up to 3 episode ids
# and 7 tool names, six knobs), and of the top level; `tests/diagnose` checks them on the longest
# answer the grammar allows over the bundled environments.
ITEM_STRUCTURE_CHARS = 720
TOP_STRUCTURE_CHARS = 40
MIN_TEXT_CHARS = 60  # below this a further weak environment is not worth its room


def schema_sizes(max_tokens: int, max_weak: int) -> tuple[int, int]:
    """(weak environments, characters per free-text field) that fit one answer of `max_tokens`.

    A grammar-constrained answer cut off by the token cap is not JSON, so the schema itself must
    fit, in the worst case: every character its own token. The answer is printable ASCII
    (`text_schema`, ASCII enums), every token but the end-of-turn one is at least one byte, and
    a small model does spell out the structure a character at a time (the embedded 135M model
    spent 448 tokens on 880 characters). Each weak environment has four text fields, plus the
    summary. Below one environment with 8-character fields (800 tokens) the answer may not fit.
    """

    def chars(items: int) -> int:
        room = max_tokens - TOP_STRUCTURE_CHARS - ITEM_STRUCTURE_CHARS * items
        return max(0, room) // (1 + 4 * items)

    items = 1
    while items < max_weak and chars(items + 1) >= MIN_TEXT_CHARS:
        items += 1
    return items, max(8, min(240, chars(items)))


def text_schema(max_chars: int) -> dict[str, Any]:
    """A free-text field: printable ASCII without quotes or backslashes, at most `max_chars`.

    The length sits in the pattern because xgrammar ignores `maxLength` beside a `pattern`.
    """
    return {"type": "string", "pattern": f"[ !#-\\[\\]-~]{{0,{max_chars}}}"}


def draft_schema(
    evidence: Evidence, *, max_items: int = 3, max_ids: int = 200, text_chars: int = 240
) -> dict[str, Any]:
    """The JSON schema of a nested draft that constrained decoding can only fill with valid names.

    Each weak environment is one alternative per environment that failed this round, holding its
    own pattern (that environment's tools and failed episode ids as enums) and its guideline (its
    tools): the answer cannot cite another environment's tool or episode, nor leave a weak
    environment without a guideline. `validate_draft` flattens it into a `DiagnosisDraft`.
    """
    failed: dict[str, list[str]] = {}
    for e in evidence.episodes:
        if not e.passed:
            failed.setdefault(e.env, []).append(e.episode_id)
    text = text_schema(text_chars)
    knobs = {
        name: {"type": "integer", "minimum": spec.min_level, "maximum": spec.max_level}
        for name, spec in KNOBS.items()
    }
    variants = []
    for env in sorted(failed) or ["none"]:
        meta = evidence.envs_meta.get(env)
        tool = {"type": "string", "enum": sorted(meta.tools) if meta and meta.tools else ["none"]}
        ids: dict[str, Any] = {"type": "string"}
        if 0 < len(failed.get(env, [])) <= max_ids:
            ids = {"type": "string", "enum": failed[env]}
        pattern = {
            "type": "object",
            "properties": {
                "category": {"type": "string", "enum": list(CATEGORIES)},
                "description": text,
                "tools": {"type": "array", "maxItems": 3, "items": tool},
                "episode_ids": {"type": "array", "minItems": 1, "maxItems": 3, "items": ids},
            },
            "required": ["category", "description", "tools", "episode_ids"],
            "additionalProperties": False,
        }
        guideline = {
            "type": "object",
            "properties": {
                "failure_pattern": text,
                "skill": text,
                "target_tools": {"type": "array", "minItems": 1, "maxItems": 4, "items": tool},
                "difficulty": {
                    "type": "object",
                    "properties": knobs,
                    "required": list(knobs),
                    "additionalProperties": False,
                },
                "n_tasks": {"type": "integer", "minimum": 1, "maximum": 100},
            },
            "required": ["failure_pattern", "skill", "target_tools", "difficulty", "n_tasks"],
            "additionalProperties": False,
        }
        variants.append(
            {
                "type": "object",
                "properties": {
                    "env": {"type": "string", "const": env},
                    "score": {"type": "number", "minimum": 0, "maximum": 1},
                    "evidence": text,
                    "motif": {"type": "string", "enum": list(MOTIFS)},
                    "pattern": pattern,
                    "guideline": guideline,
                },
                "required": ["env", "score", "evidence", "motif", "pattern", "guideline"],
                "additionalProperties": False,
            }
        )
    return {
        "type": "object",
        "properties": {
            "summary": text,
            "weak_envs": {
                "type": "array",
                "minItems": 1,
                "maxItems": max(1, min(max_items, len(variants))),
                "items": {"anyOf": variants} if len(variants) > 1 else variants[0],
            },
        },
        "required": ["summary", "weak_envs"],
        "additionalProperties": False,
    }


def flatten_draft(raw: Any) -> Any:
    """A nested draft (patterns and guidelines inside their weak environment) in the flat form."""
    if not isinstance(raw, dict) or not isinstance(raw.get("weak_envs"), list):
        return raw
    if not any(isinstance(w, dict) and ("pattern" in w or "guideline" in w) for w in raw["weak_envs"]):
        return raw
    flat: dict[str, Any] = {
        "summary": raw.get("summary", ""),
        "weak_envs": [],
        "patterns": list(raw.get("patterns", [])),
        "guidelines": list(raw.get("guidelines", [])),
    }
    for item in raw["weak_envs"]:
        if not isinstance(item, dict):
            flat["weak_envs"].append(item)
            continue
        item = dict(item)
        pattern, guideline, motif = (
            item.pop("pattern", None),
            item.pop("guideline", None),
            item.pop("motif", None),
        )
        flat["weak_envs"].append(item)
        env = item.get("env")
        if isinstance(pattern, dict):
            flat["patterns"].append({**pattern, "env": env, "motif": motif})
        if isinstance(guideline, dict):
            flat["guidelines"].append({**guideline, "env": env, "motif": motif})
    return flat


_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.S)


def extract_json(text: str) -> Any:
    """The JSON value in a model answer (bare, fenced, or the outermost braces); ReportInvalid if none."""
    candidates = [m.group(1) for m in _FENCE.finditer(text)] + [text]
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        candidates.append(text[start : end + 1])
    for candidate in candidates:
        try:
            return json.loads(candidate.strip())
        except ValueError:
            continue
    raise ReportInvalid(["the answer is not JSON"])


def validate_draft(raw: Any, evidence: Evidence) -> DiagnosisDraft:
    """Parse and check a draft against the evidence; raises `ReportInvalid` with every problem."""
    if isinstance(raw, str):
        raw = extract_json(raw)
    raw = flatten_draft(raw)
    try:
        draft = DiagnosisDraft.model_validate(raw)
    except ValidationError as exc:
        raise ReportInvalid(
            [f"schema: {'.'.join(str(p) for p in e['loc']) or 'report'}: {e['msg']}" for e in exc.errors()]
        ) from None
    problems: list[str] = []
    meta = evidence.envs_meta
    observed = {g.env for g in evidence.envs}
    episodes = {e.episode_id: e for e in evidence.episodes}
    weak = [w.env for w in draft.weak_envs]
    if not weak and any(not e.passed for e in evidence.episodes):
        problems.append("no weak environment although episodes failed")
    for name in weak:
        if name not in meta:
            problems.append(f"weak_envs: unknown environment {name!r}")
        elif name not in observed:
            problems.append(f"weak_envs: no episode of {name!r} in this round")
    if len(set(weak)) != len(weak):
        problems.append("weak_envs: an environment is listed twice")
    for i, p in enumerate(draft.patterns):
        if p.env not in meta:
            problems.append(f"patterns[{i}]: unknown environment {p.env!r}")
            continue
        problems += [
            f"patterns[{i}]: {p.env} has no tool {t!r}" for t in p.tools if t not in meta[p.env].tools
        ]
        for eid in p.episode_ids:
            ep = episodes.get(eid)
            if ep is None:
                problems.append(f"patterns[{i}]: unknown episode id {eid!r}")
            elif ep.env != p.env:
                problems.append(f"patterns[{i}]: episode {eid} is in {ep.env}, not {p.env}")
            elif ep.passed:
                problems.append(f"patterns[{i}]: episode {eid} passed, it shows no failure")
    guided = set()
    for i, g in enumerate(draft.guidelines):
        if g.env not in meta:
            problems.append(f"guidelines[{i}]: unknown environment {g.env!r}")
            continue
        guided.add(g.env)
        if g.env not in weak:
            problems.append(f"guidelines[{i}]: {g.env} is not among the weak environments")
        if not g.target_tools:
            problems.append(f"guidelines[{i}]: no target tools")
        problems += [
            f"guidelines[{i}]: {g.env} has no tool {t!r}"
            for t in g.target_tools
            if t not in meta[g.env].tools
        ]
    problems += [f"weak environment {w} has no guideline" for w in weak if w in meta and w not in guided]
    if problems:
        raise ReportInvalid(problems)
    return draft


def rank(weak: list[WeakEnv], evidence: Evidence) -> list[RankedEnv]:
    """Weak environments sorted by score (stable, so ties keep the author's order), with ranks."""
    ordered = sorted(weak, key=lambda w: -w.score)
    out = []
    for i, w in enumerate(ordered, start=1):
        stats = evidence.env_stats(w.env)
        out.append(
            RankedEnv(
                **w.model_dump(),
                rank=i,
                pass_rate=stats.pass_rate if stats else None,
                attempts=stats.attempts if stats else 0,
            )
        )
    return out
