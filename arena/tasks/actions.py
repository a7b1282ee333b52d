"""Action checks: the write calls an episode must have made, read from the instance's write log.

Work whose effects cancel out (freeze a card, then unfreeze it; add a label, then remove it)
leaves the final state equal to the initial one, so every state check passes for an agent that
did nothing. The instance logs each successful write call with its arguments (`WriteRecord`),
where the agent cannot reach it, and an action check asks that log for the required calls.
"""

from __future__ import annotations

import math
from typing import Any

from arena.tasks.model import ActionCheck, ExpectedCall
from arena.tasks.reward import CheckResult


def _same(got: Any, want: Any) -> bool:
    """Argument equality as JSON sees it: 500 == 500.0, nested values compared the same way."""
    if isinstance(want, bool) or isinstance(got, bool):
        return got is want
    if isinstance(want, (int, float)) and isinstance(got, (int, float)):
        return math.isclose(got, want, rel_tol=0.0, abs_tol=1e-9)
    if isinstance(want, dict) and isinstance(got, dict):
        return want.keys() == got.keys() and all(_same(got[k], v) for k, v in want.items())
    if isinstance(want, list) and isinstance(got, list):
        return len(want) == len(got) and all(_same(g, w) for g, w in zip(got, want, strict=True))
    return bool(got == want)


_MISSING = object()


def _matches(record: Any, expected: ExpectedCall) -> bool:
    arguments = record.arguments
    return record.tool == expected.tool and all(
        _same(arguments.get(key, _MISSING), value) for key, value in expected.args.items()
    )


def _describe(call: ExpectedCall) -> str:
    args = ", ".join(f"{k}={v!r}" for k, v in call.args.items())
    return f"{call.tool}({args})"


def run_action(write_log: list[Any] | None, check: ActionCheck) -> CheckResult:
    """Whether the write log holds the check's calls (as a subsequence when `ordered`)."""
    if write_log is None:
        return CheckResult(
            kind="action",
            name=check.label,
            passed=False,
            detail="needs an instance that logs its write calls",
        )
    missing: list[ExpectedCall] = []
    if check.ordered:
        position = 0
        for expected in check.calls:
            found = next(
                (i for i in range(position, len(write_log)) if _matches(write_log[i], expected)), None
            )
            if found is None:
                missing.append(expected)
            else:
                position = found + 1
    else:
        used: set[int] = set()
        for expected in check.calls:
            found = next(
                (i for i, r in enumerate(write_log) if i not in used and _matches(r, expected)), None
            )
            if found is None:
                missing.append(expected)
            else:
                used.add(found)
    if missing:
        order = " in this order" if check.ordered and len(check.calls) > 1 else ""
        detail = f"no successful {', '.join(_describe(c) for c in missing)}{order} among {len(write_log)} write call(s)"
        return CheckResult(kind="action", name=check.label, passed=False, detail=detail)
    return CheckResult(
        kind="action", name=check.label, passed=True, detail="the required write calls were made"
    )
