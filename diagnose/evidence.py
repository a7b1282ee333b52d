"""Evidence for the diagnosis: per-episode records and per env / category / tool statistics.

`build_evidence` turns a round's verified episodes into flat tables: one `EpisodeRecord` per
episode (with the failure taxonomy of failed ones and the tool-graph motifs its task exercises)
and `GroupStats` per environment, top-level category, (environment, tool) and motif: attempts, pass rate with a Wilson 95% interval, mean reward,
finish reasons, failure categories and tool call counts. The tables are plain JSON
(`Evidence.tables()`), which is what the diagnosis agent's sandboxed Python tool receives.
`replay_diffs` recomputes an episode's state diffs (agent and reference) by replaying calls, since
the store keeps transcripts, not database states.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any, Literal

from pydantic import BaseModel, Field

from arena.env.state import StateDiff
from arena.episode.transcript import Transcript
from arena.synth.motifs import task_motifs
from arena.tasks.model import Task
from arena.tasks.replay import new_instance, replay_reference
from arena.tasks.reward import Verdict
from curriculum.stats import wilson_interval
from diagnose.taxonomy import SEVERITY, Failure, FailureCategory, classify


class EnvMeta(BaseModel):
    """What the diagnosis knows about an environment: its tools and categories."""

    name: str
    title: str = ""
    category: list[str] = Field(default_factory=list)
    kind: Literal["executable", "simulated"] = "executable"
    description: str = ""
    tools: list[str] = Field(default_factory=list)
    write_tools: list[str] = Field(default_factory=list)

    @property
    def top_category(self) -> str:
        """The top-level category (the arena stratifies by it)."""
        return self.category[0] if self.category else "Uncategorized"

    @classmethod
    def from_environment(cls, env: Any) -> EnvMeta:
        """From a loaded `arena.env.Environment` (duck-typed)."""
        return cls(
            name=env.name,
            title=getattr(env, "title", ""),
            category=list(getattr(env, "category", []) or []),
            kind=getattr(env, "kind", "executable"),
            description=getattr(env, "description", "")[:500],
            tools=list(getattr(env, "tool_names", None) or [s.name for s in env.tool_specs]),
            write_tools=list(getattr(env, "write_tools", []) or []),
        )


class EpisodeInput(BaseModel):
    """One verified episode as the diagnosis reads it."""

    episode_id: str
    env: str
    task: Task
    transcript: Transcript
    verdict: Verdict
    agent_diff: StateDiff | None = None
    expected_diff: StateDiff | None = None


class EpisodeRecord(BaseModel):
    """One row of the episodes table."""

    episode_id: str
    env: str
    category: str
    task_id: str
    passed: bool
    reward: float
    finish: str
    turns: int
    calls_ok: int
    calls_failed: int
    malformed: int
    tools_called: list[str]
    motifs: list[str] = Field(default_factory=list)  # arena.synth.motifs names the task exercises
    failure: FailureCategory | None = None
    failure_categories: list[FailureCategory] = Field(default_factory=list)
    failure_tools: list[str] = Field(default_factory=list)
    failure_detail: str = ""
    severity: float = 0.0  # SEVERITY of the primary failure; 0 for passed episodes


class ToolCounts(BaseModel):
    """Calls of one tool: successes, failures and the failures' kinds."""

    ok: int = 0
    failed: int = 0
    error_kinds: dict[str, int] = Field(default_factory=dict)


class GroupStats(BaseModel):
    """Statistics of a group of episodes (an environment, a category, or episodes using a tool)."""

    level: Literal["env", "category", "tool", "motif", "overall"]
    env: str | None = None
    category: str | None = None
    tool: str | None = None
    motif: str | None = None
    attempts: int
    passed: int
    pass_rate: float
    pass_low: float  # Wilson 95% interval of the pass rate
    pass_high: float
    mean_reward: float
    finishes: dict[str, int]
    failures: dict[str, int]  # primary failure category -> episodes
    weighted_failures: float  # sum of failure severities
    calls: dict[str, ToolCounts] = Field(default_factory=dict)  # per tool (for level=tool: that tool)


class Evidence(BaseModel):
    """Everything the diagnosis (agent or fallback) reads."""

    round: int
    envs_meta: dict[str, EnvMeta]
    episodes: list[EpisodeRecord]
    envs: list[GroupStats]
    categories: list[GroupStats]
    tools: list[GroupStats]
    overall: GroupStats
    motifs: list[GroupStats] = Field(default_factory=list)

    def env_stats(self, env: str) -> GroupStats | None:
        """The statistics of one environment."""
        return next((g for g in self.envs if g.env == env), None)

    def tables(self) -> dict[str, Any]:
        """The evidence as plain JSON tables (what the agent's Python tool gets as `data`)."""
        return {
            "episodes": [e.model_dump(mode="json") for e in self.episodes],
            "envs": [
                g.model_dump(mode="json", exclude={"level", "category", "tool", "motif"}) for g in self.envs
            ],
            "categories": [
                g.model_dump(mode="json", exclude={"level", "env", "tool", "motif"}) for g in self.categories
            ],
            "tools": [g.model_dump(mode="json", exclude={"level", "category", "motif"}) for g in self.tools],
            "motifs": [
                g.model_dump(mode="json", exclude={"level", "env", "category", "tool"}) for g in self.motifs
            ],
            "overall": self.overall.model_dump(
                mode="json", exclude={"level", "env", "category", "tool", "motif"}
            ),
            "environments": {n: m.model_dump(mode="json") for n, m in self.envs_meta.items()},
        }


def _record(ep: EpisodeInput, meta: EnvMeta | None) -> EpisodeRecord:
    tr = ep.transcript
    failure: Failure | None = None
    if not ep.verdict.passed:
        failure = classify(
            ep.task,
            tr,
            ep.verdict,
            write_tools=meta.write_tools if meta else (),
            agent_diff=ep.agent_diff,
            expected_diff=ep.expected_diff,
        )
    return EpisodeRecord(
        episode_id=ep.episode_id,
        env=ep.env,
        category=meta.top_category if meta else "Uncategorized",
        task_id=ep.task.id,
        passed=ep.verdict.passed,
        reward=ep.verdict.reward,
        finish=tr.finish,
        turns=tr.num_turns,
        calls_ok=sum(1 for c in tr.calls if c.result.ok),
        calls_failed=sum(1 for c in tr.calls if not c.result.ok),
        malformed=tr.malformed_calls,
        tools_called=list(dict.fromkeys(c.call.name for c in tr.calls)),
        motifs=list(task_motifs(ep.task, meta.write_tools if meta else ())),
        failure=failure.primary if failure else None,
        failure_categories=failure.categories if failure else [],
        failure_tools=failure.tools if failure else [],
        failure_detail=failure.details[failure.primary] if failure else "",
        severity=SEVERITY[failure.primary] if failure else 0.0,
    )


def _tool_counts(episodes: list[EpisodeInput]) -> dict[str, ToolCounts]:
    out: dict[str, ToolCounts] = defaultdict(ToolCounts)
    for ep in episodes:
        for c in ep.transcript.calls:
            counts = out[c.call.name]
            if c.result.ok:
                counts.ok += 1
            else:
                counts.failed += 1
                kind = c.result.error_kind or "error"
                counts.error_kinds[kind] = counts.error_kinds.get(kind, 0) + 1
        for m in ep.transcript.malformed_errors:
            if m.error.name:  # unknown tool or bad arguments: attributable to a named tool
                counts = out[m.error.name]
                counts.failed += 1
                counts.error_kinds[m.error.kind] = counts.error_kinds.get(m.error.kind, 0) + 1
    return dict(sorted(out.items()))


def _group(
    level: Literal["env", "category", "tool", "motif", "overall"],
    records: list[EpisodeRecord],
    inputs: list[EpisodeInput],
    **keys: str,
) -> GroupStats:
    n = len(records)
    passed = sum(r.passed for r in records)
    low, high = wilson_interval(passed, n)
    calls = _tool_counts(inputs)
    if level == "tool":
        calls = {k: v for k, v in calls.items() if k == keys["tool"]}
    return GroupStats(
        level=level,
        attempts=n,
        passed=passed,
        pass_rate=passed / n if n else 0.0,
        pass_low=low,
        pass_high=high,
        mean_reward=sum(r.reward for r in records) / n if n else 0.0,
        finishes=dict(Counter(r.finish for r in records).most_common()),
        failures=dict(Counter(r.failure for r in records if r.failure).most_common()),
        weighted_failures=sum(r.severity for r in records),
        calls=calls,
        **keys,
    )


def build_evidence(round_id: int, episodes: list[EpisodeInput], envs_meta: dict[str, EnvMeta]) -> Evidence:
    """Classify every failed episode and aggregate per environment, category and tool."""
    records = [_record(ep, envs_meta.get(ep.env)) for ep in episodes]
    pairs = list(zip(records, episodes, strict=True))

    def split(key: Any) -> dict[Any, tuple[list[EpisodeRecord], list[EpisodeInput]]]:
        out: dict[Any, tuple[list[EpisodeRecord], list[EpisodeInput]]] = defaultdict(lambda: ([], []))
        for rec, ep in pairs:
            for k in key(rec, ep):
                out[k][0].append(rec)
                out[k][1].append(ep)
        return out

    by_env = split(lambda r, e: [r.env])
    by_cat = split(lambda r, e: [r.category])
    by_tool = split(lambda r, e: [(r.env, t) for t in r.tools_called])
    by_motif = split(lambda r, e: r.motifs)
    return Evidence(
        round=round_id,
        envs_meta=envs_meta,
        episodes=records,
        envs=[_group("env", rs, es, env=k) for k, (rs, es) in sorted(by_env.items())],
        categories=[_group("category", rs, es, category=k) for k, (rs, es) in sorted(by_cat.items())],
        tools=[_group("tool", rs, es, env=k[0], tool=k[1]) for k, (rs, es) in sorted(by_tool.items())],
        overall=_group("overall", records, episodes),
        motifs=[_group("motif", rs, es, motif=k) for k, (rs, es) in sorted(by_motif.items())],
    )


async def replay_diffs(
    env: Any, task: Task, transcript: Transcript, *, sandbox: Any = None
) -> tuple[StateDiff, StateDiff]:
    """(agent diff, reference diff) of an executable environment, by replaying both call lists.

    Tools are deterministic per episode (time and ids come from the handle), so replaying the
    agent's calls in order on a fresh instance reaches the state its episode ended in.
    """
    instance = new_instance(env, sandbox)
    try:
        for c in transcript.calls:
            await instance.call(c.call.name, dict(c.call.arguments))
        agent = instance.diff()
    finally:
        await instance.aclose()
    ref_instance, _ = await replay_reference(env, task, sandbox=sandbox)
    try:
        expected = ref_instance.diff()
    finally:
        await ref_instance.aclose()
    return agent, expected
