"""`arena bench sim`: how far simulated tools and the judge can be trusted (issue 29).

For each bundled executable environment with tasks, `simulate.fidelity.measure_env` replays the
tasks' reference calls on the environment's simulated twin (tool fidelity), has the helper judge
gold and non-working executable episodes beside the programmatic verifier (judge fidelity), and
times both kinds of episode (cost). This module turns the records into rates with 95% Wilson
intervals (`curriculum.stats`, which `simulate` may not import), prints them per environment and
overall (one JSON object with `--json`), and with `--save` stores the overall figures under the
helper's identity (`arena.store.fidelity`). The definitions are in `docs/bench-sim.md`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

from ops.cli import Cli, CliError
from ops.commands.synth import quiet

if TYPE_CHECKING:
    from ops.config import ArenaConfig
    from ops.config_sections import ModelConfig
    from simulate.fidelity import CallRecord, CostRecord, EnvFidelity, JudgeRecord


def helper_identity(model_config: ModelConfig) -> str:
    """A stable name of the helper a measurement belongs to: `local:embedded`, `http:MODEL@URL`.

    A local model folder is named by its absolute path (`local:/var/lib/arena/models/helper`), so a
    relative path in a config and the same folder on the command line name one helper.
    """
    model = model_config.model
    if model_config.backend == "local" and model != "embedded":
        model = os.path.abspath(os.path.expanduser(model))
    identity = f"{model_config.backend}:{model}"
    if model_config.backend == "http" and model_config.base_url:
        identity += "@" + model_config.base_url.rstrip("/")
    return identity


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


def _load_config(path: Path | None) -> ArenaConfig:
    from ops.config import ConfigError, load_config

    try:
        return load_config(path)
    except ConfigError as exc:
        raise CliError(str(exc)) from None


def helper_section(args: argparse.Namespace) -> tuple[ModelConfig, Path | None]:
    """The helper's configuration (from `--helper` or the config's [models.helper]) and the data dir."""
    from ops.config_sections import ModelConfig

    if args.helper is not None:
        if args.helper != "embedded" and not Path(args.helper).is_dir():
            raise CliError(f"--helper {args.helper!r}: not 'embedded' and no such model folder")
        return ModelConfig(backend="local", model=args.helper), None
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
    args: argparse.Namespace, section: ModelConfig, data_dir: Path | None, envs: list[Any]
) -> list[Any]:
    from arena.protocols import ModelError
    from simulate.backends import build_chat_model
    from simulate.fidelity import CountingModel, FidelityConfig, measure_env

    spec = section.to_spec(data_dir, "helper") if data_dir is not None else None
    if spec is None:
        from simulate.backends import ModelSpec

        spec = ModelSpec(model=section.model, role="helper")
    try:
        model = await anyio.to_thread.run_sync(lambda: build_chat_model(spec))
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
    identity = helper_identity(section)
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
