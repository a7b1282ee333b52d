"""The diagnosis agent: the helper model, a sandboxed Python tool over the evidence, a validated report.

The agent (Agent-World §3.2.2) gets the round's statistics, the environments' tools and compacted
failure traces; it may call `python` (code run in the sandbox with the evidence tables as `data`)
to compute its own aggregates, then answers with a JSON report. Its last permitted call is
grammar-constrained to the report schema. The report is checked against the evidence; when it
is invalid, or the budget (model calls, tokens, seconds) runs out, or the model fails, the
deterministic ranking in `diagnose.fallback` takes over and the report records why.
`run_diagnosis` never raises for anything the model or its code does.
"""

from __future__ import annotations

import json
import time
from typing import Any

import anyio
import structlog

from arena.difficulty import Difficulty
from arena.episode.parser import parse_tool_calls
from arena.protocols import ChatModel, ModelError
from arena.sandbox import SandboxProgramError, SandboxViolation
from arena.synth.motifs import MOTIFS
from arena.types import Message, SamplingParams, ToolCall, ToolSpec
from diagnose.compact import compact_trace
from diagnose.config import DiagnosisConfig
from diagnose.evidence import EpisodeInput, Evidence
from diagnose.fallback import SKILLS, fallback_report
from diagnose.motifs import weak_motifs
from diagnose.report import (
    AgentUsage,
    DiagnosisReport,
    ReportInvalid,
    draft_schema,
    rank,
    schema_sizes,
    validate_draft,
)
from diagnose.taxonomy import CATEGORIES
from diagnose.text_quality import clean_report

log = structlog.get_logger(__name__)


PYTHON_TOOL = ToolSpec(
    name="python",
    description=(
        "Run Python 3 over the evidence. The variable `data` holds the tables: episodes, envs, "
        "categories, tools (lists of dicts), overall, environments (name -> tools). print() what "
        "you want to see or assign `result`. No files, no network."
    ),
    parameters={
        "type": "object",
        "properties": {"code": {"type": "string", "description": "Python source to run."}},
        "required": ["code"],
    },
)

# Runs in the sandbox: the model's code with the evidence as `data`; JSON in, JSON out.
_RUNNER = """
import json

def run(payload):
    namespace = {"data": payload["data"], "json": json}
    exec(compile(payload["code"], "<diagnosis>", "exec"), namespace)
    result = namespace.get("result")
    return json.loads(json.dumps(result, default=str))
"""

SYSTEM = (
    "You are the diagnostician of an AI agent that uses tools in software environments. From "
    "evaluation evidence you find where the agent is weakest, why it fails, and what practice tasks "
    "would fix it. Ground every claim in the evidence: use only environment names, tool names and "
    "episode ids that appear in it. Failure categories: " + ", ".join(CATEGORIES) + ". "
    "Name each weakness also by the tool-graph motif that transfers to other environments: "
    + ", ".join(MOTIFS)
    + ". "
    "You may call the `python` tool to compute aggregates over the evidence tables. When you are "
    "done, reply with one JSON object and nothing else, with keys: summary (string); weak_envs "
    "(list of {env, score 0..1 where 1 is weakest, evidence}); patterns (list of {category, env, "
    "description, tools, episode_ids, motif}); guidelines (one per weak env: {env, failure_pattern, "
    "target_tools, skill, motif, difficulty: {walk_length 1-6, ambiguity 0-2, weak_edge_share 0-4, "
    "distractors 0-4, conversational 0-1}, n_tasks})."
)


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def select_traces(evidence: Evidence, episodes: list[EpisodeInput], config: DiagnosisConfig) -> list[str]:
    """Compacted failure traces, round-robin over environments (weakest first) within the budget."""
    by_id = {e.episode_id: e for e in episodes}
    queues: dict[str, list[Any]] = {}
    for rec in evidence.episodes:
        if not rec.passed and rec.episode_id in by_id:
            queues.setdefault(rec.env, []).append(rec)
    order = sorted(queues, key=lambda env: (evidence.env_stats(env).pass_rate, env))  # type: ignore[union-attr]
    out: list[str] = []
    used = 0
    while any(queues.values()) and used + config.per_trace_tokens <= config.trace_tokens:
        for env in order:
            if not queues[env] or used + config.per_trace_tokens > config.trace_tokens:
                continue
            rec = queues[env].pop(0)
            out.append(compact_trace(by_id[rec.episode_id], rec, budget_tokens=config.per_trace_tokens))
            used += config.per_trace_tokens
    return out


def build_prompt(evidence: Evidence, episodes: list[EpisodeInput], config: DiagnosisConfig) -> str:
    """The user message: statistics, environments and their tools, failure traces."""
    o = evidence.overall
    lines = [
        f"Round {evidence.round}: {o.attempts} evaluation episode(s), overall pass rate {_pct(o.pass_rate)}.",
        "",
        "Per environment (attempts, pass rate [95% CI], mean reward, failure categories):",
    ]
    for g in sorted(evidence.envs, key=lambda g: g.pass_rate):
        meta = evidence.envs_meta.get(g.env or "")
        fails = ", ".join(f"{k} {v}" for k, v in g.failures.items()) or "none"
        lines.append(
            f"- {g.env} ({meta.top_category if meta else '?'}): {g.attempts}, {_pct(g.pass_rate)} "
            f"[{_pct(g.pass_low)}-{_pct(g.pass_high)}], {g.mean_reward:.2f}; {fails}"
        )
    failing_tools = sorted(
        ((g.env, g.tool, c.ok, c.failed) for g in evidence.tools for c in g.calls.values() if c.failed),
        key=lambda r: -r[3],
    )[:10]
    if evidence.motifs:
        lines += ["", "Per tool-graph motif (attempts, pass rate [95% CI]):"]
        lines += [
            f"- {g.motif}: {g.attempts}, {_pct(g.pass_rate)} [{_pct(g.pass_low)}-{_pct(g.pass_high)}]"
            for g in sorted(evidence.motifs, key=lambda g: g.pass_rate)
        ]
    if failing_tools:
        lines += ["", "Tools with failed calls (env/tool: ok, failed):"]
        lines += [f"- {env}/{tool}: {ok}, {failed}" for env, tool, ok, failed in failing_tools]
    lines += ["", "Environments and their tools (* = writes):"]
    for name, meta in sorted(evidence.envs_meta.items()):
        tools = ", ".join(t + ("*" if t in meta.write_tools else "") for t in meta.tools)
        lines.append(f"- {name} [{' / '.join(meta.category)}]: {tools}")
    traces = select_traces(evidence, episodes, config)
    if traces:
        lines += ["", "Failure traces:", *[f"---\n{t}" for t in traces]]
    return "\n".join(lines)


async def _run_python(sandbox: Any, call: ToolCall, data: dict[str, Any], limit: int) -> tuple[str, bool]:
    """(observation, ok) of one python call."""
    code = call.arguments.get("code")
    if not isinstance(code, str) or not code.strip():
        return "error: the python tool needs a `code` string", False
    try:
        outcome = await sandbox.execute_program(_RUNNER, "run", {"data": data, "code": code})
    except SandboxProgramError as exc:
        return f"error: {exc}"[:limit], False
    except SandboxViolation as exc:
        return f"stopped by the sandbox ({exc.kind}): {exc.message}"[:limit], False
    text = outcome.stdout
    if outcome.result is not None:
        text += ("\n" if text else "") + "result = " + json.dumps(outcome.result, default=str)
    return (text or "(no output; print something or assign `result`)")[:limit], True


async def _agent_loop(
    evidence: Evidence,
    episodes: list[EpisodeInput],
    helper: ChatModel,
    sandbox: Any,
    config: DiagnosisConfig,
    usage: AgentUsage,
) -> tuple[DiagnosisReport | None, str]:
    """The agent's report, or None and the reason it has none."""
    # Sized to the per-call cap: a constrained answer cut off by the cap would not be JSON.
    items, chars = schema_sizes(config.max_tokens_per_call, min(config.max_weak, 5))
    schema = draft_schema(evidence, max_items=items, text_chars=chars)
    messages = [
        Message(role="system", content=SYSTEM),
        Message(role="user", content=build_prompt(evidence, episodes, config)),
    ]
    data = evidence.tables() if sandbox is not None else {}
    reason = "no answer"
    # The cancel scope in `run_diagnosis` cannot interrupt a backend blocked in a thread, so the
    # deadline is also checked before each call.
    deadline = time.perf_counter() + config.max_seconds
    while True:
        if time.perf_counter() >= deadline:
            return None, f"time budget spent ({config.max_seconds:g} s); last problem: {reason}"
        if usage.calls >= config.max_calls:
            return None, f"call budget spent ({config.max_calls} calls); last problem: {reason}"
        left = config.max_tokens - usage.tokens
        if left < 16:
            return None, f"token budget spent ({usage.tokens} tokens); last problem: {reason}"
        final = sandbox is None or usage.calls == config.max_calls - 1
        if final and left < config.max_tokens_per_call:
            # The report's schema is sized to the full per-call cap: a shorter call could end
            # mid-answer, which is not JSON.
            return None, f"token budget spent ({usage.tokens} tokens); last problem: {reason}"
        params = SamplingParams(
            temperature=0.0,
            max_tokens=min(config.max_tokens_per_call, left),
            json_schema=schema if final else None,
        )
        completion = await helper.chat(messages, tools=None if final else [PYTHON_TOOL], params=params)
        usage.calls += 1
        usage.prompt_tokens += completion.usage.prompt_tokens
        usage.completion_tokens += completion.usage.completion_tokens
        calls = completion.tool_calls or parse_tool_calls(completion.text, known_tools=["python"]).calls
        if calls and not final:
            messages.append(Message(role="assistant", content=completion.text, tool_calls=calls))
            for i, call in enumerate(calls[:3]):
                observation, ok = await _run_python(sandbox, call, data, config.python_output_chars)
                usage.python_runs += 1
                usage.python_errors += 0 if ok else 1
                messages.append(
                    Message(
                        role="tool", content=observation, tool_call_id=call.id or f"call{i}", name="python"
                    )
                )
            reason = "the agent was still computing"
            continue
        try:
            draft = validate_draft(completion.text, evidence)
        except ReportInvalid as exc:
            reason = f"invalid report: {exc}"
            log.info("diagnosis_report_rejected", problems=exc.problems[:10], call=usage.calls)
            messages.append(Message(role="assistant", content=completion.text))
            messages.append(
                Message(
                    role="user",
                    content="The report was rejected:\n- "
                    + "\n- ".join(exc.problems[:12])
                    + "\nReply with the corrected JSON only.",
                )
            )
            continue
        report = DiagnosisReport(
            round=evidence.round,
            source="agent",
            summary=draft.summary,
            weak_envs=rank(draft.weak_envs, evidence),
            patterns=draft.patterns,
            guidelines=draft.guidelines,
            overall_pass_rate=evidence.overall.pass_rate if evidence.overall.attempts else None,
            episodes=evidence.overall.attempts,
        )
        report = clean_report(report, evidence, {k: skill for k, (skill, _) in SKILLS.items()})
        if report.replaced_text:
            log.info("diagnosis_text_replaced", fields=report.replaced_text)
        return report, ""


async def run_diagnosis(
    evidence: Evidence,
    episodes: list[EpisodeInput],
    *,
    helper: ChatModel | None,
    sandbox: Any = None,
    config: DiagnosisConfig | None = None,
    difficulties: dict[str, Difficulty] | None = None,
    n_tasks: int = 10,
) -> DiagnosisReport:
    """The round's report: the agent's when it is valid and within budget, else the fallback's.

    `sandbox` (a `SandboxPool`) enables the agent's Python tool; without it the agent answers
    directly. `difficulties` (per environment, from the curriculum) seed the fallback's guidelines,
    each asking for `n_tasks` tasks.
    """
    config = config or DiagnosisConfig()
    usage = AgentUsage()
    motifs = weak_motifs(evidence)

    def fallback(reason: str) -> DiagnosisReport:
        report = fallback_report(
            evidence,
            reason=reason,
            max_weak=config.max_weak,
            n_tasks=n_tasks,
            difficulties=difficulties,
        )
        report.usage = usage
        report.weak_motifs = motifs
        log.info("diagnosis_fallback", round=evidence.round, reason=reason[:300], weak=report.weak)
        return report

    if helper is None:
        return fallback("no helper model configured")
    if not any(not e.passed for e in evidence.episodes):
        return fallback("no failed episode to diagnose")
    started = time.perf_counter()
    report: DiagnosisReport | None = None
    reason = ""
    with anyio.move_on_after(config.max_seconds) as scope:
        try:
            report, reason = await _agent_loop(evidence, episodes, helper, sandbox, config, usage)
        except ModelError as exc:
            reason = f"helper model failed: {exc}"
    usage.seconds = round(time.perf_counter() - started, 3)
    if scope.cancelled_caught:
        return fallback(f"time budget spent ({config.max_seconds:g} s)")
    if report is None:
        return fallback(reason)
    report.usage = usage
    report.weak_motifs = motifs
    log.info(
        "diagnosis_agent_report",
        round=evidence.round,
        weak=report.weak,
        calls=usage.calls,
        tokens=usage.tokens,
    )
    return report
