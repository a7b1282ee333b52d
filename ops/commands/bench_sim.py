"""`arena bench sim`: how far simulated tools and the judge can be trusted (issue 29).

For each bundled executable environment with tasks, `simulate.fidelity.measure_env` replays the
tasks' reference calls on the environment's simulated twin (tool fidelity), has the helper judge
gold and non-working executable episodes beside the programmatic verifier (judge fidelity), and
times both kinds of episode (cost). `ops.fidelity_report` turns the records into rates with 95%
Wilson intervals per environment and overall; this module prints them (one JSON object with
`--json`) and with `--save` stores the overall figures under the helper's identity
(`arena.store.fidelity`). The definitions are in `docs/bench-sim.md`.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

from ops.cli import Cli, CliError
from ops.commands.synth import quiet
from ops.fidelity_report import build_report, print_report

if TYPE_CHECKING:
    from ops.config import ArenaConfig
    from simulate.backends import ModelSpec


def _load_config(path: Path | None) -> ArenaConfig:
    from ops.config import ConfigError, load_config

    try:
        return load_config(path)
    except ConfigError as exc:
        raise CliError(str(exc)) from None


def helper_section(args: argparse.Namespace) -> tuple[ModelSpec, Path | None]:
    """The helper's configuration (from `--helper` or the config's [models.helper]) and the data dir."""
    from simulate.backends import ModelSpec

    if args.helper is not None:
        if args.helper != "embedded" and not Path(args.helper).is_dir():
            raise CliError(f"--helper {args.helper!r}: not 'embedded' and no such model folder")
        # A model of the command line's own: on the best device there is, as `arena synth` loads it.
        return ModelSpec(backend="local", model=args.helper, device="auto"), None
    config = _load_config(args.config)
    return config.models.helper, config.data.dir


def select_envs(names: list[str]) -> tuple[list[Any], list[str]]:
    """The bundled executable environments to measure (all with tasks, or `names`); CliError on bad names."""
    from arena.env.loader import load_environment
    from arena.env.registry import bundled_env_dirs

    bundled = {e.name: e for e in (load_environment(d) for d in bundled_env_dirs())}
    envs = {name: e for name, e in bundled.items() if e.kind == "executable"}
    notes: list[str] = []
    simulated = [n for n in names if n in bundled and n not in envs]
    if simulated:
        raise CliError(
            f"--env {', '.join(simulated)}: simulated, not executable (the bench measures simulation "
            f"against executable environments: {', '.join(sorted(envs))})"
        )
    unknown = [n for n in names if n not in envs]
    if unknown:
        raise CliError(
            f"unknown environment(s) for --env: {', '.join(unknown)} "
            f"(bundled executable ones: {', '.join(sorted(envs))})"
        )
    picked = [envs[n] for n in dict.fromkeys(names)] if names else list(envs.values())
    chosen = []
    for env in picked:
        if env.tasks_path is None:
            if names:
                raise CliError(f"--env {env.name}: the environment has no tasks.toml, so nothing to replay")
            notes.append(f"{env.name}: skipped, no tasks")
        elif env.sandboxed:
            notes.append(f"{env.name}: skipped, its tools may only run sandboxed")
        else:
            chosen.append(env)
    if not chosen:
        raise CliError("no bundled executable environment with tasks to measure")
    return chosen, notes


async def _measure(
    args: argparse.Namespace, section: ModelSpec, data_dir: Path | None, envs: list[Any]
) -> list[Any]:
    from arena.protocols import ModelError
    from simulate.backends import build_chat_model
    from simulate.fidelity import CountingModel, FidelityConfig, measure_env

    cache_dir = data_dir / "models" if data_dir is not None else None
    try:
        model = await anyio.to_thread.run_sync(
            lambda: build_chat_model(section, role="helper", cache_dir=cache_dir)
        )
    except (ModelError, ValueError, OSError) as exc:
        raise CliError(f"cannot load the helper model {section.model!r}: {exc}") from None
    helper = CountingModel(model)
    config = FidelityConfig(tasks=args.tasks, episodes_per_kind=args.episodes_per_kind)
    results = []
    try:
        with tempfile.TemporaryDirectory(prefix="arena-bench-sim-") as tmp:
            for env in envs:
                print(f"[bench sim] {env.name} ...", file=sys.stderr, flush=True)
                results.append(await measure_env(env, helper, config, Path(tmp)))
    finally:
        close = getattr(model, "aclose", None)
        if close is not None:
            await close()
    return results


def fidelity_row(report: dict[str, Any]) -> Any:
    """The store row of a report's overall figures."""
    from arena.store import HelperFidelityRow

    judge, tools = report["overall"]["judge"], report["overall"]["tools"]
    values: dict[str, Any] = {}
    for name, key in (
        ("agreement", "judge_agreement"),
        ("false_pass", "false_pass"),
        ("false_fail", "false_fail"),
    ):
        r = judge[name]
        prefix = "agreement" if name == "agreement" else name
        values[key] = r["value"]
        values[f"{prefix}_low"] = r["low"]
        values[f"{prefix}_high"] = r["high"]
    return HelperFidelityRow(
        helper_id=report["helper"],
        episodes=judge["episodes"],
        tool_fidelity=tools["tool_fidelity"],
        report=report,
        **values,
    )


def _in_store(config_path: Path | None, report: dict[str, Any] | None) -> int:
    """Check the configured store is at the newest revision; with `report`, store its row (the id)."""
    from alembic.script import ScriptDirectory

    from arena.store import Store, StoreError, save_fidelity
    from arena.store.engine import alembic_config

    config = _load_config(config_path)
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()

    async def main() -> int:
        async with Store(config.database_url, busy_timeout_s=config.store.busy_timeout_s) as store:
            current = await store.revision()
            if current != head:
                raise CliError(
                    f"--save: the store is at revision {current or 'none'}, not {head}: "
                    "run `arena db upgrade` first"
                )
            if report is None:
                return 0
            async with store.transaction() as session:
                row = await save_fidelity(session, fidelity_row(report))
                return int(row.id or 0)

    try:
        return anyio.run(main)
    except (StoreError, OSError) as exc:
        raise CliError(f"--save: {exc}") from None


def save_report(report: dict[str, Any], config_path: Path | None) -> int:
    """Store the overall figures in the configured store; returns the row's id."""
    judge = report["overall"]["judge"]
    if judge["episodes"] == 0 or judge["false_pass"]["n"] == 0:
        raise CliError("--save: no episode the verifier failed was judged: no false-pass rate to store")
    return _in_store(config_path, report)


def cmd_bench_sim(args: argparse.Namespace) -> int:
    """`arena bench sim`."""
    quiet()
    if args.tasks < 1:
        raise CliError(f"--tasks must be at least 1 (got {args.tasks})")
    if args.episodes_per_kind < 1:
        raise CliError(f"--episodes-per-kind must be at least 1 (got {args.episodes_per_kind})")
    envs, notes = select_envs(args.env)
    section, data_dir = helper_section(args)
    identity = section.identity()
    if args.save:
        _in_store(args.config, None)  # before the run, not after it: a run can take hours
    started = time.perf_counter()
    results = anyio.run(_measure, args, section, data_dir, envs)
    from simulate.fidelity import FidelityConfig

    settings = FidelityConfig(tasks=args.tasks, episodes_per_kind=args.episodes_per_kind).model_dump(
        mode="json"
    )
    report = build_report(
        results, helper_id=identity, settings=settings, seconds=time.perf_counter() - started, notes=notes
    )
    if args.save:
        row_id = save_report(report, args.config)
        print(f"[bench sim] saved as helper_fidelity row {row_id} ({identity})", file=sys.stderr)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print_report(report)
    return 0


def register(cli: Cli) -> None:
    """Add `arena bench sim`."""
    p = cli.group("bench", help="performance benchmarks (JSON with --json)").add_parser(
        "sim",
        help="how far simulated tools and the helper's judge agree with executable environments",
        description="Replays bundled tasks on simulated twins (tool fidelity), compares the helper's "
        "judge with the programmatic verifier (agreement, false-pass, false-fail, Wilson 95%%) and "
        "times both. See docs/bench-sim.md.",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument(
        "--env", action="extend", nargs="+", default=[], metavar="NAME",
        help="bundled executable environment(s) to measure (default: every one with tasks)",
    )  # fmt: skip
    p.add_argument("--tasks", type=int, default=5, help="tasks per environment (default 5)")
    p.add_argument(
        "--episodes-per-kind",
        type=int,
        default=5,
        help="judged gold episodes, and as many non-working ones, per environment (default 5; "
        "at most one gold episode per task)",
    )
    who = p.add_mutually_exclusive_group()
    who.add_argument("--helper", metavar="MODEL", help="local helper: 'embedded' or a model folder")
    who.add_argument(
        "--config",
        type=Path,
        help="TOML configuration: its [models.helper] and store (default: $ARENA_CONFIG)",
    )
    p.add_argument(
        "--save", action="store_true", help="store the overall figures under the helper's identity"
    )
    p.set_defaults(func=cmd_bench_sim)
