"""The report of `arena bench sim`: `simulate.fidelity`'s records as rates, and the table printed.

Per environment and overall (the overall pools every call and episode): tool fidelity, the
judge's agreement with the verifier and its false-pass and false-fail rates with 95% Wilson
intervals (`curriculum.stats`, which `simulate` may not import), and the cost of a simulated
episode against an executable one. The definitions are in `docs/bench-sim.md`.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from simulate.fidelity import CallRecord, CostRecord, EnvFidelity, JudgeRecord


def rate(successes: int, n: int) -> dict[str, Any]:
    """`successes / n` with its 95% Wilson interval; value and bounds are None when `n` is 0."""
    from curriculum.stats import wilson_interval

    if n == 0:
        return {"value": None, "low": None, "high": None, "k": 0, "n": 0}
    low, high = wilson_interval(successes, n)
    return {"value": successes / n, "low": low, "high": high, "k": successes, "n": n}


def _fraction(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def summarize_tools(calls: list[CallRecord]) -> dict[str, Any]:
    """Tool fidelity: facts of the real results reproduced by the twin, all / given / hidden."""
    facts = sum(len(c.facts) for c in calls)
    reproduced = sum(len(c.reproduced) for c in calls)
    given = sum(len(c.given) for c in calls)
    given_reproduced = sum(len(set(c.reproduced) & set(c.given)) for c in calls)
    return {
        "calls": len(calls),
        "outcome_agreement": _fraction(sum(c.real_ok == c.sim_ok for c in calls), len(calls)),
        "simulator_failures": sum(bool(c.sim_error) and not c.sim_ok for c in calls),
        "facts": facts,
        "reproduced": reproduced,
        "tool_fidelity": _fraction(reproduced, facts),
        "given_facts": given,
        "given_fidelity": _fraction(given_reproduced, given),
        "hidden_facts": facts - given,
        "hidden_fidelity": _fraction(reproduced - given_reproduced, facts - given),
    }


def summarize_judge(records: list[JudgeRecord]) -> dict[str, Any]:
    """Judge against verifier: agreement, false-pass and false-fail rates with Wilson intervals."""
    fails = [r for r in records if not r.verifier_passed]
    passes = [r for r in records if r.verifier_passed]
    by_kind: dict[str, dict[str, int]] = {}
    for r in records:
        entry = by_kind.setdefault(r.kind, {"episodes": 0, "verifier_passed": 0, "judge_passed": 0})
        entry["episodes"] += 1
        entry["verifier_passed"] += r.verifier_passed
        entry["judge_passed"] += r.judge_passed
    return {
        "episodes": len(records),
        "verifier_passed": len(passes),
        "verifier_failed": len(fails),
        "judge_errors": sum(bool(r.judge_error) for r in records),
        "agreement": rate(sum(r.judge_passed == r.verifier_passed for r in records), len(records)),
        "false_pass": rate(sum(r.judge_passed for r in fails), len(fails)),
        "false_fail": rate(sum(not r.judge_passed for r in passes), len(passes)),
        "by_kind": by_kind,
    }


def summarize_cost(cost: list[CostRecord]) -> dict[str, Any]:
    """Mean seconds and helper tokens per simulated episode, against the executable one."""
    n = len(cost)
    if n == 0:
        return {"episodes": 0, "sim_seconds": None, "sim_tokens": None, "sim_helper_calls": None,
                "exec_seconds": None, "slowdown": None}  # fmt: skip
    sim_s = sum(c.sim_seconds for c in cost) / n
    exec_s = sum(c.exec_seconds for c in cost) / n
    return {
        "episodes": n,
        "sim_seconds": sim_s,
        "sim_tokens": sum(c.sim_tokens for c in cost) / n,
        "sim_helper_calls": sum(c.sim_helper_calls for c in cost) / n,
        "exec_seconds": exec_s,
        "slowdown": sim_s / exec_s if exec_s > 0 else None,
    }


def _summary(
    env: str, tasks: int, calls: list[Any], judge: list[Any], cost: list[Any], **extra: Any
) -> dict[str, Any]:
    return {
        "env": env,
        "tasks": tasks,
        "tools": summarize_tools(calls),
        "judge": summarize_judge(judge),
        "cost": summarize_cost(cost),
        **extra,
    }


def build_report(
    results: list[EnvFidelity], *, helper_id: str, settings: dict[str, Any], seconds: float, notes: list[str]
) -> dict[str, Any]:
    """The whole report: per environment and overall (the overall pools every episode and call)."""
    envs = [
        _summary(r.env, len(r.tasks), r.calls, r.judge, r.cost, twin_dropped=r.twin_dropped, notes=r.notes)
        for r in results
    ]
    overall = _summary(
        "overall",
        sum(len(r.tasks) for r in results),
        [c for r in results for c in r.calls],
        [j for r in results for j in r.judge],
        [c for r in results for c in r.cost],
    )
    kinds = Counter(j.verifier_passed for r in results for j in r.judge)
    return {
        "helper": helper_id,
        "settings": settings,
        "envs": envs,
        "overall": overall,
        "balance": {"verifier_passed": kinds[True], "verifier_failed": kinds[False]},
        "seconds": seconds,
        "notes": notes,
    }


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def _interval(r: dict[str, Any]) -> str:
    if r["value"] is None:
        return "-"
    return f"{100 * r['value']:.0f}% [{100 * r['low']:.0f},{100 * r['high']:.0f}] n={r['n']}"


def print_report(report: dict[str, Any]) -> None:
    """The human-readable table."""
    print(f"helper: {report['helper']}")
    head = (
        f"{'environment':<16} {'tasks':>5} {'facts':>5} {'tool fid.':>9} {'agreement':>22} "
        f"{'false-pass':>22} {'false-fail':>22} {'sim s/ep':>8} {'tok/ep':>7} {'exec ms/ep':>10}"
    )
    print(head)
    for row in [*report["envs"], report["overall"]]:
        tools, judge, cost = row["tools"], row["judge"], row["cost"]
        sim_s = "-" if cost["sim_seconds"] is None else f"{cost['sim_seconds']:.1f}"
        tokens = "-" if cost["sim_tokens"] is None else f"{cost['sim_tokens']:.0f}"
        exec_ms = "-" if cost["exec_seconds"] is None else f"{1000 * cost['exec_seconds']:.1f}"
        print(
            f"{row['env']:<16} {row['tasks']:>5} {tools['facts']:>5} {_pct(tools['tool_fidelity']):>9} "
            f"{_interval(judge['agreement']):>22} {_interval(judge['false_pass']):>22} "
            f"{_interval(judge['false_fail']):>22} {sim_s:>8} {tokens:>7} {exec_ms:>10}"
        )
    overall = report["overall"]
    print(
        f"tool facts: given {_pct(overall['tools']['given_fidelity'])} of {overall['tools']['given_facts']}, "
        f"hidden {_pct(overall['tools']['hidden_fidelity'])} of {overall['tools']['hidden_facts']}; "
        f"call outcome agreement {_pct(overall['tools']['outcome_agreement'])}; "
        f"judge errors {overall['judge']['judge_errors']}; wall {report['seconds']:.0f}s"
    )
    for note in report["notes"]:
        print(f"note: {note}")
