"""The failure taxonomy: one root-cause category for every failed episode, by deterministic rules.

Each rule reads the episode's transcript (finish reason, tool calls and results, malformed calls),
its verdict, the task's reference calls and, when available, the state diffs of the agent's run
and of the reference run. A failed episode gets every category whose rule fires (`categories`)
and a `primary` one: the first of `PRECEDENCE` that fired, so that a root cause (a format error,
an ignored tool error) wins over its consequences (a missing write, a wrong answer).

"Slip" categories (format error, unknown tool, invalid arguments) only count when they dominate
the episode — at least as many such errors as successful calls, or the runner gave up on format —
because a single malformed call the agent recovered from is not why the episode failed.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Any, Literal, get_args

from pydantic import BaseModel, Field

from arena.env.state import StateDiff
from arena.episode.transcript import Transcript
from arena.tasks.model import Task
from arena.tasks.reward import STATE_CHECKS, Verdict

FailureCategory = Literal[
    "format_error",
    "unknown_tool",
    "invalid_arguments",
    "tool_error_ignored",
    "ungrounded_write",
    "wrong_entity",
    "missing_write",
    "extra_write",
    "wrong_answer",
    "gave_up_early",
    "max_turns",
    "simulator_fault",
    "other",
]

# Derived from the Literal so the two can never drift apart.
CATEGORIES: tuple[FailureCategory, ...] = get_args(FailureCategory)

# Root causes first, consequences last.
PRECEDENCE: tuple[FailureCategory, ...] = (
    "simulator_fault",
    "format_error",
    "unknown_tool",
    "invalid_arguments",
    "max_turns",
    "tool_error_ignored",
    "gave_up_early",
    "ungrounded_write",
    "wrong_entity",
    "missing_write",
    "extra_write",
    "wrong_answer",
    "other",
)

# How much a failure of this kind says about the policy (used by the fallback ranking). Faults of
# the environment or the simulators say almost nothing; state damage says the most.
SEVERITY: dict[FailureCategory, float] = {
    "format_error": 0.9,
    "unknown_tool": 0.8,
    "invalid_arguments": 0.8,
    "tool_error_ignored": 0.9,
    "ungrounded_write": 1.0,
    "wrong_entity": 1.0,
    "missing_write": 1.0,
    "extra_write": 1.0,
    "wrong_answer": 0.7,
    "gave_up_early": 0.8,
    "max_turns": 0.6,
    "simulator_fault": 0.1,
    "other": 0.5,
}

DESCRIPTIONS: dict[FailureCategory, str] = {
    "format_error": "tool calls the runner could not parse",
    "unknown_tool": "calls to tools the environment does not have",
    "invalid_arguments": "calls with arguments the tool's schema rejects",
    "tool_error_ignored": "a tool refused the call and the agent answered anyway",
    "ungrounded_write": "a write named a record the episode never looked up (an id from memory)",
    "wrong_entity": "the right tool on the wrong record (different ids than the reference)",
    "missing_write": "a change the task required was never made",
    "extra_write": "changes the task did not ask for (collateral writes)",
    "wrong_answer": "the state is right but the final answer is not",
    "gave_up_early": "answered after far fewer calls than the task needs",
    "max_turns": "ran out of turns or tokens, or kept resending a refused call",
    "simulator_fault": "the environment, a simulator or the model backend failed",
    "other": "failed checks no rule explains",
}

_SLIP_FORMAT = {"bad_json", "not_an_object", "missing_name", "unclosed_tag", "stray_close_tag"}
_FAULT_KINDS = {"internal", "sandbox", "read_only"}
_ANSWER_CHECKS = {"answer", "rubric"}


class Failure(BaseModel):
    """The taxonomy of one failed episode."""

    primary: FailureCategory
    categories: list[FailureCategory]
    details: dict[str, str] = Field(default_factory=dict)  # category -> why the rule fired
    tools: list[str] = Field(default_factory=list)  # the tools implicated, most relevant first


def _is_id_arg(name: str) -> bool:
    return name == "id" or name.endswith("_id") or name.endswith("_ids")


def _ok_calls(tr: Transcript) -> list[tuple[str, dict[str, Any], bool]]:
    """(tool, arguments, changed state) of every successful call."""
    return [(c.call.name, c.call.arguments, c.result.writes) for c in tr.calls if c.result.ok]


def _subset(expected: dict[str, Any], got: dict[str, Any]) -> bool:
    return all(got.get(k) == v for k, v in expected.items())


class _Ctx:
    """What the rules read, computed once."""

    def __init__(
        self,
        task: Task,
        tr: Transcript,
        verdict: Verdict,
        write_tools: Iterable[str],
        agent_diff: StateDiff | None,
        expected_diff: StateDiff | None,
    ) -> None:
        self.task, self.tr, self.verdict = task, tr, verdict
        self.write_tools = set(write_tools)
        self.agent_diff, self.expected_diff = agent_diff, expected_diff
        self.ok = _ok_calls(tr)
        self.ref_writes = [c for c in task.reference if c.name in self.write_tools]
        self.agent_writes = [(t, a) for t, a, w in self.ok if w or t in self.write_tools]

    def failed_checks(self, kinds: Collection[str]) -> list[str]:
        return [c.name or c.kind for c in self.verdict.checks if not c.passed and c.kind in kinds]


def _simulator_fault(x: _Ctx) -> tuple[str, list[str]] | None:
    if x.tr.finish in ("env_error", "model_error"):
        return f"episode ended with {x.tr.finish}: {x.tr.finish_detail[:120]}", []
    faults = [c.result.tool for c in x.tr.calls if c.result.error_kind in _FAULT_KINDS]
    if faults:
        return f"{len(faults)} call(s) hit an environment fault", faults
    return None


def _slip(x: _Ctx, kinds: set[str], result_kind: str | None) -> tuple[int, list[str]]:
    n, tools = 0, []
    for m in x.tr.malformed_errors:
        if m.error.kind in kinds:
            n += 1
            if m.error.name:
                tools.append(m.error.name)
    if result_kind is not None:
        for c in x.tr.calls:
            if c.result.error_kind == result_kind:
                n += 1
                tools.append(c.call.name)
    return n, tools


def _format_error(x: _Ctx) -> tuple[str, list[str]] | None:
    n, _ = _slip(x, _SLIP_FORMAT, None)
    if x.tr.finish == "format_error":
        return f"the runner stopped after repeated malformed calls ({x.tr.malformed_calls})", []
    if n and n >= len(x.ok):
        return f"{n} unparseable call(s) against {len(x.ok)} successful one(s)", []
    return None


def _unknown_tool(x: _Ctx) -> tuple[str, list[str]] | None:
    n, tools = _slip(x, {"unknown_tool"}, "unknown_tool")
    if n and n >= len(x.ok):
        return f"{n} call(s) to unknown tools: {', '.join(sorted(set(tools)))[:120]}", tools
    return None


def _invalid_arguments(x: _Ctx) -> tuple[str, list[str]] | None:
    n, tools = _slip(x, {"bad_arguments"}, "invalid_arguments")
    if n and n >= len(x.ok):
        return f"{n} call(s) with invalid arguments", tools
    return None


def _max_turns(x: _Ctx) -> tuple[str, list[str]] | None:
    if x.tr.finish in ("max_turns", "max_tokens", "stuck"):
        return f"episode ended with {x.tr.finish} after {x.tr.num_turns} turn(s)", []
    return None


def _tool_error_ignored(x: _Ctx) -> tuple[str, list[str]] | None:
    if x.tr.finish not in ("answered", "user_stop"):
        return None
    ignored: list[str] = []
    for i, c in enumerate(x.tr.calls):
        if c.result.ok or c.result.error_kind != "tool_error":
            continue
        # Recovered when the same tool later succeeded; otherwise the agent moved on past the error.
        if not any(later.result.ok and later.call.name == c.call.name for later in x.tr.calls[i + 1 :]):
            ignored.append(c.call.name)
    if ignored:
        return (
            f"tool error(s) from {', '.join(dict.fromkeys(ignored))} never resolved before answering",
            ignored,
        )
    return None


def _gave_up_early(x: _Ctx) -> tuple[str, list[str]] | None:
    need = len(x.task.reference)
    if x.tr.finish not in ("answered", "user_stop") or need == 0:
        return None
    if len(x.ok) * 2 < need:
        missing = [c.name for c in x.task.reference if c.name not in {t for t, _, _ in x.ok}]
        return f"answered after {len(x.ok)} successful call(s); the reference needs {need}", missing
    return None


def _ungrounded_write(x: _Ctx) -> tuple[str, list[str]] | None:
    # The verifier already found them (`arena.tasks.grounding`): "tool(argument='value')" each.
    if not x.verdict.ungrounded:
        return None
    tools = [u.split("(", 1)[0] for u in x.verdict.ungrounded]
    return "wrote ids it never looked up: " + ", ".join(x.verdict.ungrounded[:3]), tools


def _wrong_entity(x: _Ctx) -> tuple[str, list[str]] | None:
    wrong: list[str] = []
    for ref in x.task.reference:
        ids = {k: v for k, v in ref.arguments.items() if _is_id_arg(k)}
        same_tool = [a for t, a, _ in x.ok if t == ref.name]
        if not ids or not same_tool:
            continue
        if any(_subset(ids, a) for a in same_tool):
            continue
        if any(any(k in a and a[k] != v for k, v in ids.items()) for a in same_tool):
            wrong.append(ref.name)
    if wrong:
        return f"called {', '.join(dict.fromkeys(wrong))} on other records than the reference", wrong
    if x.agent_diff is not None and x.expected_diff is not None:
        for table, want in x.expected_diff.tables.items():
            got = x.agent_diff.tables.get(table)
            if got is None or not want.changed or not got.changed:
                continue
            if not {_key(c.key) for c in want.changed} & {_key(c.key) for c in got.changed}:
                return f"changed other rows of {table} than the reference", []
    return None


def _key(key: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((k, str(v)) for k, v in key.items()))


def _missing_write(x: _Ctx) -> tuple[str, list[str]] | None:
    missing = [
        ref.name
        for ref in x.ref_writes
        if not any(t == ref.name and _subset(ref.arguments, a) for t, a in x.agent_writes)
    ]
    if missing:
        return f"required write(s) not made: {', '.join(dict.fromkeys(missing))}", missing
    if x.agent_diff is not None and x.expected_diff is not None:
        absent = [t for t in x.expected_diff.tables if t not in x.agent_diff.tables]
        if absent:
            return f"no change in table(s) {', '.join(absent)} the reference changes", []
    return None


def _extra_write(x: _Ctx) -> tuple[str, list[str]] | None:
    ref_names = {c.name for c in x.ref_writes}
    extra = [t for t, _ in x.agent_writes if t not in ref_names]
    if len(x.agent_writes) > len(x.ref_writes) and not extra:
        extra = [t for t, _ in x.agent_writes[len(x.ref_writes) :]]
    if extra:
        return f"write(s) the task did not ask for: {', '.join(dict.fromkeys(extra))}", extra
    if x.agent_diff is not None and x.expected_diff is not None:
        collateral = [t for t in x.agent_diff.tables if t not in x.expected_diff.tables]
        if collateral:
            return f"collateral change(s) in table(s) {', '.join(collateral)}", []
    return None


def _wrong_answer(x: _Ctx) -> tuple[str, list[str]] | None:
    bad_answer = x.failed_checks(_ANSWER_CHECKS)
    if bad_answer and not x.failed_checks(STATE_CHECKS):
        return f"answer check(s) failed: {', '.join(bad_answer)[:120]}", []
    return None


_RULES = {
    "simulator_fault": _simulator_fault,
    "format_error": _format_error,
    "unknown_tool": _unknown_tool,
    "invalid_arguments": _invalid_arguments,
    "max_turns": _max_turns,
    "tool_error_ignored": _tool_error_ignored,
    "gave_up_early": _gave_up_early,
    "ungrounded_write": _ungrounded_write,
    "wrong_entity": _wrong_entity,
    "missing_write": _missing_write,
    "extra_write": _extra_write,
    "wrong_answer": _wrong_answer,
}


def classify(
    task: Task,
    transcript: Transcript,
    verdict: Verdict,
    *,
    write_tools: Iterable[str] = (),
    agent_diff: StateDiff | None = None,
    expected_diff: StateDiff | None = None,
) -> Failure:
    """The taxonomy of one failed episode (call it only for episodes whose verdict did not pass).

    `write_tools` are the environment's write tools (reference calls to them are the writes the
    task requires); the diffs, when given, let the state rules see rows as well as calls.
    """
    x = _Ctx(task, transcript, verdict, write_tools, agent_diff, expected_diff)
    details: dict[str, str] = {}
    tools: list[str] = []
    fired: list[FailureCategory] = []
    for name in PRECEDENCE:
        rule = _RULES.get(name)
        if rule is None:
            continue
        hit = rule(x)
        if hit is not None:
            fired.append(name)
            details[name] = hit[0]
            tools.extend(hit[1])
    if not fired:
        failed = x.failed_checks(STATE_CHECKS | _ANSWER_CHECKS)
        fired = ["other"]
        details["other"] = f"failed check(s): {', '.join(failed)[:120] or 'none recorded'}"
    return Failure(primary=fired[0], categories=fired, details=details, tools=list(dict.fromkeys(tools)))
