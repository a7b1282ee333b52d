"""The tool unit-test gate (Agent-World): run `tests.toml`, keep the tools that pass.

Every case runs on a fresh instance. A tool is kept only when it passes more than half of its
cases (a tool without cases is not kept: its accuracy is unknown); an environment passes the gate
when at least one tool is kept and at least one case passes.
"""

from __future__ import annotations

import math
import sqlite3
from typing import Any

import anyio.lowlevel
from pydantic import BaseModel, Field

from arena.env.instance import ExecutableInstance, ToolResult, ToolSandbox
from arena.env.runtime import Environment
from arena.env.spec import TestCase

KEEP_ABOVE = 0.5


class CaseResult(BaseModel):
    """One case's outcome; `reason` says why it failed."""

    index: int
    label: str
    tool: str
    line: int | None = None
    passed: bool
    reason: str | None = None


class ToolVerdict(BaseModel):
    """One tool's accuracy on its cases and whether the gate keeps it."""

    tool: str
    passed: int
    total: int
    kept: bool
    reason: str | None = None

    @property
    def accuracy(self) -> float:
        """Fraction of cases passed (0 without cases)."""
        return self.passed / self.total if self.total else 0.0


class GateReport(BaseModel):
    """The gate's verdict on one environment."""

    env: str
    version: str
    ok: bool
    kept_tools: list[str] = Field(default_factory=list)
    dropped_tools: list[str] = Field(default_factory=list)
    tools: list[ToolVerdict] = Field(default_factory=list)
    cases: list[CaseResult] = Field(default_factory=list)
    reason: str | None = None


def _scalar_equal(expected: Any, actual: Any) -> bool:
    if isinstance(expected, bool) or isinstance(actual, bool):
        return isinstance(expected, bool) and isinstance(actual, bool) and expected == actual
    if isinstance(expected, int | float) and isinstance(actual, int | float):
        return math.isclose(expected, actual, rel_tol=1e-9, abs_tol=1e-9)
    if hasattr(expected, "isoformat") and isinstance(actual, str):
        # TOML turns unquoted dates into date objects; the tool returns ISO strings.
        return expected.isoformat() == actual or str(expected) == actual
    return bool(expected == actual)


def subset_mismatch(expected: Any, actual: Any, where: str = "result") -> str | None:
    """Why `actual` does not contain `expected`, or None when it does.

    Dicts: every expected key present with a matching value (extra keys are fine). Lists: same
    length, element by element. Scalars: equal (numbers compared numerically, bools strictly).
    """
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return f"{where}: expected an object, got {_short(actual)}"
        for key, value in expected.items():
            if key not in actual:
                return f"{where}.{key}: missing"
            reason = subset_mismatch(value, actual[key], f"{where}.{key}")
            if reason:
                return reason
        return None
    if isinstance(expected, list):
        if not isinstance(actual, list):
            return f"{where}: expected a list, got {_short(actual)}"
        if len(expected) != len(actual):
            return f"{where}: expected {len(expected)} items, got {len(actual)}"
        for i, (e, a) in enumerate(zip(expected, actual, strict=True)):
            reason = subset_mismatch(e, a, f"{where}[{i}]")
            if reason:
                return reason
        return None
    if not _scalar_equal(expected, actual):
        return f"{where}: expected {expected!r}, got {_short(actual)}"
    return None


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def case_failure(case: TestCase, result: ToolResult, conn: sqlite3.Connection) -> str | None:
    """Why a case failed given the call's result and the state after it, or None if it passed."""
    if case.expect_error:
        if result.ok:
            return f"expected an error, got {_short(result.output)}"
        if result.error_kind in ("internal", "read_only", "sandbox", "unknown_tool"):
            # An expected error must be the tool's own refusal, not a crash.
            return f"expected a clean error, the tool crashed: {result.error}"
        if (
            isinstance(case.expect_error, str)
            and case.expect_error.lower() not in (result.error or "").lower()
        ):
            return f"expected an error containing {case.expect_error!r}, got {result.error!r}"
    elif not result.ok:
        return f"unexpected error: {result.error}"
    elif case.expect is not None:
        reason = subset_mismatch(case.expect, result.output)
        if reason:
            return reason
    # With expect_error too: the state after a refused call (typically: unchanged).
    for check in case.sql_checks():
        try:
            rows = [list(r) for r in conn.execute(check.sql).fetchall()]
        except sqlite3.Error as exc:
            return f"expect_sql failed to run: {exc}"
        reason = subset_mismatch(check.rows, rows, "rows")
        if reason:
            return f"expect_sql {_short(check.sql, 60)}: {reason}"
    return None


async def run_case(env: Environment, case: TestCase, *, sandbox: ToolSandbox | None = None) -> str | None:
    """Run one case on a fresh instance; the failure reason or None."""
    instance: ExecutableInstance = env.new_instance(sandbox=sandbox)
    try:
        result = await instance.call(case.tool, case.args)
        return case_failure(case, result, instance.db.connection)
    finally:
        await instance.aclose()


def verdicts(env: Environment, cases: list[CaseResult]) -> GateReport:
    """Apply the keep rule to case results."""
    tools: list[ToolVerdict] = []
    for name in env.tool_names:
        mine = [c for c in cases if c.tool == name]
        passed = sum(c.passed for c in mine)
        if not mine:
            tools.append(ToolVerdict(tool=name, passed=0, total=0, kept=False, reason="no test cases"))
            continue
        kept = passed / len(mine) > KEEP_ABOVE
        reason = None if kept else f"passed {passed}/{len(mine)} cases (needs more than half)"
        tools.append(ToolVerdict(tool=name, passed=passed, total=len(mine), kept=kept, reason=reason))
    kept_tools = [t.tool for t in tools if t.kept]
    valid_case = any(c.passed and c.tool in kept_tools for c in cases)
    reason = None
    if not kept_tools:
        reason = "no tool passed its tests"
    elif not valid_case:
        reason = "no valid test case"
    return GateReport(
        env=env.name,
        version=env.version,
        ok=reason is None,
        kept_tools=kept_tools,
        dropped_tools=[t.tool for t in tools if not t.kept],
        tools=tools,
        cases=cases,
        reason=reason,
    )


async def run_tool_tests(env: Environment, *, sandbox: ToolSandbox | None = None) -> GateReport:
    """Run every case of the environment's tests.toml and apply the gate."""
    if env.kind != "executable":
        raise TypeError(f"environment {env.name!r} is {env.kind}: it has no tool unit tests")
    results: list[CaseResult] = []
    for i, case in enumerate(env.tests):
        reason = await run_case(env, case, sandbox=sandbox)
        results.append(
            CaseResult(
                index=i,
                label=case.label(i),
                tool=case.tool,
                line=case.line,
                passed=reason is None,
                reason=reason,
            )
        )
        await anyio.lowlevel.checkpoint()
    return verdicts(env, results)
