"""`arena diagnose [--round N] [--json]`: print a round's stored diagnosis report."""

from __future__ import annotations

import argparse
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from ops.cli import Cli, CliError

T = TypeVar("T")


def register(cli: Cli) -> None:
    """Add `arena diagnose`."""
    p = cli.command(
        "diagnose", "Show the diagnosis report of a round (weak environments, patterns, guidelines)."
    )
    p.add_argument("--round", type=int, default=None, help="the round (default: the newest diagnosed round)")
    p.add_argument("--json", action="store_true", help="print the stored report as JSON")
    p.add_argument("--config", type=Path, help="TOML configuration file (default: $ARENA_CONFIG)")
    p.set_defaults(func=show)


def read_store(config_path: Path | None, read: Callable[[Any], Awaitable[T]]) -> T:
    """Open the configured store, check it is migrated, and run `read(session)` in one transaction."""
    import anyio

    from arena.store import Store, StoreError
    from ops.config import ConfigError, load_config

    try:
        config = load_config(config_path)
    except ConfigError as exc:
        raise CliError(str(exc)) from None
    url = config.database_url
    if url.startswith("sqlite") and "///" in url:
        path = Path(url.split("///", 1)[1])
        if str(path) != ":memory:" and not path.exists():
            raise CliError(
                f"no store at {path} (has the daemon run? set ARENA_DATA_DIR or ARENA_DATABASE_URL)"
            )

    async def main() -> T:
        async with Store(url, busy_timeout_s=config.store.busy_timeout_s) as store:
            if await store.revision() is None:
                raise CliError("the store is not initialized: run `arena db upgrade`")
            async with store.transaction() as session:
                return await read(session)

    try:
        return anyio.run(main)
    except (StoreError, OSError) as exc:
        raise CliError(str(exc)) from None


def show(args: argparse.Namespace) -> int:
    """Print the stored report."""
    from sqlmodel import col, select

    from arena.store import DiagnosisReportRow
    from diagnose.wiring import load_report

    if args.round is not None and args.round < 1:
        raise CliError(f"--round must be 1 or more, not {args.round}")

    async def read(session: Any) -> Any:
        round_no = args.round
        if round_no is None:
            stmt = select(DiagnosisReportRow.round).order_by(col(DiagnosisReportRow.round).desc()).limit(1)
            round_no = (await session.exec(stmt)).first()
            if round_no is None:
                raise CliError("no diagnosis stored yet")
        try:
            report = await load_report(session, round_no)
        except ValueError as exc:
            raise CliError(str(exc)) from None
        if report is None:
            raise CliError(f"no diagnosis stored for round {round_no}")
        return report

    report = read_store(args.config, read)
    if args.json:
        print(json.dumps(report.model_dump(mode="json"), indent=2))
    else:
        print(render(report))
    return 0


def render(report: Any) -> str:
    """The report as a few readable lines."""
    head = f"round {report.round}: diagnosis by {report.source}"
    if report.fallback_reason:
        head += f" (fallback: {report.fallback_reason})"
    lines = [head]
    if report.overall_pass_rate is not None:
        lines.append(f"{report.episodes} episode(s), pass rate {report.overall_pass_rate:.2f}")
    if report.summary:
        lines.append(report.summary)
    lines.append("weak environments:" if report.weak_envs else "weak environments: none")
    for w in report.weak_envs:
        rate = "" if w.pass_rate is None else f", pass rate {w.pass_rate:.2f} over {w.attempts}"
        lines.append(f"  {w.rank}. {w.env}  score {w.score:.2f}{rate}  {w.evidence}")
    if report.patterns:
        lines.append("failure patterns:")
        for p in report.patterns:
            tools = f" [{', '.join(p.tools)}]" if p.tools else ""
            lines.append(
                f"  - {p.env} {p.category}{tools}: {p.description} (e.g. {', '.join(p.episode_ids)})"
            )
    if report.guidelines:
        lines.append("task guidelines:")
        for g in report.guidelines:
            knobs = ", ".join(f"{k}={v}" for k, v in g.difficulty.as_dict().items())
            lines.append(
                f"  - {g.env}: {g.n_tasks} task(s) on {', '.join(g.target_tools)}; {g.skill} ({knobs})"
            )
    return "\n".join(lines)
