"""`arena bench tau2 --parity` and `arena bench env --tau2`: Arena's τ² domains beside τ²'s own.

Both run τ²'s own environment in a side interpreter (`--python`, default `$ARENA_TAU2_PYTHON` or
`python3`: one with tau2-bench's dependencies, made by `scripts/tau2-side-venv.sh CHECKOUT`) on a
checkout the user supplies (`--from`), and Arena's port on the import of the same checkout:

- `--parity` replays every task's gold actions both ways and reports, per task, whether every tool
  result and the end state are equal and whether the gold trajectory scores 1.0 under Arena's
  reward (`arena.public.tau2.parity`);
- `arena bench env --tau2 DOMAIN` reports the median reset, tool call and environment check of
  an episode on both sides, measured in the same run.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from ops.cli import CliError

DEFAULT_PYTHON = "python3"


def side_python(args: argparse.Namespace) -> str:
    """The side interpreter: `--python`, else `$ARENA_TAU2_PYTHON`, else `python3`."""
    return args.python or os.environ.get("ARENA_TAU2_PYTHON") or DEFAULT_PYTHON


def add_side_arguments(p: argparse.ArgumentParser) -> None:
    """`--from` and `--python`, shared by the parity and the environment comparison."""
    p.add_argument(
        "--from", dest="checkout", metavar="CHECKOUT", help="a tau2-bench checkout (its src/ and data/)"
    )
    p.add_argument(
        "--python",
        metavar="PYTHON",
        help="an interpreter with tau2-bench's dependencies (default $ARENA_TAU2_PYTHON or python3; "
        "scripts/tau2-side-venv.sh makes one)",
    )


def _checkout(args: argparse.Namespace) -> Path:
    if not args.checkout:
        raise CliError("--from CHECKOUT is needed: the tau2-bench checkout to compare with")
    checkout = Path(args.checkout).expanduser()
    if not (checkout / "src" / "tau2").is_dir():
        raise CliError(f"--from {checkout}: not a tau2-bench checkout (no src/tau2)")
    return checkout


def _domain(config: Any, name: str) -> Any:
    from arena.public.tau2.model import load_domain

    try:
        return load_domain(config.data.dir, name)
    except FileNotFoundError:
        raise CliError(
            f"τ² {name} is not imported: arena envs import-tau2 --from CHECKOUT --domain {name}"
        ) from None
    except ValueError as exc:
        raise CliError(str(exc)) from None


def parity_reports(args: argparse.Namespace, config: Any, domains: list[str]) -> list[dict[str, Any]]:
    """`--parity`: one summary per domain, with the tasks that differ."""
    from arena.public.tau2.parity import SideError, run_parity

    checkout, python = _checkout(args), side_python(args)
    tasks = [t.strip() for t in (args.tasks or "").split(",") if t.strip()] or None
    out = []
    for name in domains:
        domain = _domain(config, name)
        try:
            report = run_parity(domain, checkout, python, task_ids=tasks, timing=not args.no_timing)
        except (SideError, ValueError) as exc:
            raise CliError(f"{name}: {exc}") from None
        different = [t.model_dump() for t in report.tasks if not (t.results_equal and t.end_state_equal)]
        below = [t.task for t in report.tasks if t.gold_reward != 1.0]
        out.append(report.summary() | {"different": different, "gold_reward_below_1": below})
    return out


def parity_text(docs: list[dict[str, Any]]) -> list[str]:
    """The parity summaries as lines."""
    lines = []
    for d in docs:
        lines.append(
            f"τ² {d['domain']} @ {(d['commit'] or 'unknown')[:12]}: {d['tasks']} tasks, {d['calls']} calls; "
            f"results equal {d['results_equal']}/{d['tasks']}, end state equal {d['end_state_equal']}/{d['tasks']}, "
            f"gold reward 1.0 {d['gold_reward_1']}/{d['tasks']} ({d['nl_assertions_unjudged']} NL assertions not judged)"
        )
        for t in d["different"][:10]:
            lines.append(
                f"  task {t['task']}: results {t['results_equal']}, end state {t['end_state_equal']}"
            )
        if "timing" in d:
            lines += timing_text(d["timing"])
    return lines


def env_comparison(args: argparse.Namespace, config: Any) -> dict[str, Any]:
    """`arena bench env --tau2 DOMAIN`: the cost of an episode's environment, both sides."""
    from arena.public.tau2.parity import SideError, run_parity

    domain = _domain(config, args.tau2)
    tasks = [t.id for t in domain.tasks]
    if args.limit:
        tasks = tasks[: args.limit]
    try:
        report = run_parity(domain, _checkout(args), side_python(args), task_ids=tasks, timing=True)
    except (SideError, ValueError) as exc:
        raise CliError(f"{args.tau2}: {exc}") from None
    summary = report.summary()
    return {"domain": domain.name, "commit": report.commit, "tasks": len(tasks), **summary["timing"]}


def timing_text(t: dict[str, Any]) -> list[str]:
    """Side-by-side timings as lines (milliseconds)."""

    def ms(v: float) -> str:
        return f"{v * 1e3:.3f} ms"

    return [
        f"  reset   τ² {ms(t['tau2_reset_s'])}  Arena {ms(t['arena_reset_s'])}  ({t['reset_ratio']}x)",
        f"  call    τ² {ms(t['tau2_call_s'])}  Arena {ms(t['arena_call_s'])}",
        f"  check   τ² {ms(t['tau2_verify_s'])}  Arena {ms(t['arena_verify_s'])} "
        f"(uncached {ms(t['arena_verify_uncached_s'])})  ({t['verify_ratio']}x)",
        f"  episode (reset + check)  {t['episode_ratio']}x cheaper in Arena",
    ]
