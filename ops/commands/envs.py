"""`arena envs list|show|check`: what environments exist, what they offer, whether they are sound.

Every command takes `--env-path` (repeatable, `:`-separated) on top of `ARENA_ENV_PATH` and the
bundled set. `check` runs the loader's validation, the tool unit-test gate and, for the tasks in
the folder's `tasks.toml`, the gold and adversary gates (a task that a non-working agent earns
reward on fails the check, named); a broken folder prints one line per problem and exits
non-zero, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import anyio
import structlog

from arena.env.errors import EnvLoadError, Problem
from arena.env.instance import ToolSandbox
from arena.env.loader import is_env_dir, load_environment
from arena.env.registry import check_env_path, discover, env_dirs_in, env_path_from_environ, split_env_path
from arena.env.runtime import Environment
from arena.env.unit_tests import run_tool_tests
from arena.tasks.gates import gate_tasks
from arena.tasks.toml_io import load_tasks
from ops.cli import Cli, CliError


def _stderr_logger(*_args: Any) -> structlog.PrintLogger:
    # Looked up per logger: sys.stderr may be swapped (tests capture it) after configuration.
    return structlog.PrintLogger(sys.stderr)


def quiet_logs() -> None:
    """Keep stdout for the command's output: unless logging is configured, log lines go to stderr."""
    if not structlog.is_configured():
        structlog.configure(logger_factory=_stderr_logger)


def env_path_parent() -> argparse.ArgumentParser:
    """The shared `--env-path` option (a parent parser for every command that finds environments)."""
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument(
        "--env-path",
        action="append",
        default=[],
        metavar="DIR[:DIR...]",
        help="extra environment folders (an environment, or a parent of environments); "
        "repeatable, added after ARENA_ENV_PATH",
    )
    return parent


def daemon_config(args: argparse.Namespace) -> Any:
    """The daemon's configuration (`--config`, else ARENA_CONFIG, defaults and ARENA_* variables)."""
    from ops.config import load_config

    try:
        return load_config(getattr(args, "config", None))
    except Exception as exc:  # a broken config file is a user error here, not a traceback
        raise CliError(f"cannot read the configuration for the data dir: {exc}") from None


def env_path_of(args: argparse.Namespace) -> list[Path]:
    """The folders the daemon loads besides the bundled ones, then the `--env-path` folders.

    The daemon's are `data.env_path` and `DATA_DIR/envs` (imported servers, environments SYNTHESIZE
    built), so a command names what the daemon trains on without `--env-path`. A missing or empty
    `--env-path` folder is a user error, reported clearly.
    """
    paths = split_env_path(args.env_path)
    problems = check_env_path([*env_path_from_environ(), *paths])
    if problems:
        raise CliError("; ".join(str(p) for p in problems))
    config = daemon_config(args)
    grown = config.envs_dir
    daemons = [Path(p).expanduser() for p in config.data.env_path]
    return [*(p for p in daemons if env_dirs_in(p)), *([grown] if env_dirs_in(grown) else []), *paths]


def resolve_one(target: str, env_path: list[Path]) -> Path:
    """An environment folder from a name or a path."""
    as_path = Path(target)
    if as_path.is_dir() and is_env_dir(as_path):
        return as_path
    found = discover(env_path)
    if target in found:
        return found[target]
    known = ", ".join(found) or "(none)"
    raise CliError(f"unknown environment {target!r} (known: {known})")


def load_or_fail(path: Path) -> Environment:
    """Load an environment for `show`; its problems become a clear CLI error."""
    try:
        return load_environment(path)
    except EnvLoadError as exc:
        for p in exc.problems:
            print(f"  {p}", file=sys.stderr)
        raise CliError(
            f"environment at {path} is broken ({len(exc.problems)} problems, listed above)"
        ) from None


# ----------------------------------------------------------------------------------------- list


def summary(env: Environment) -> dict[str, Any]:
    """One `envs list --json` entry."""
    return {
        "name": env.name,
        "title": env.title,
        "category": env.category,
        "kind": env.kind,
        "origin": env.origin,
        "tools": len(env.tool_names),
        "write_tools": env.write_tools,
        "version": env.version,
        "path": str(env.path),
        "ok": True,
    }


def cmd_list(args: argparse.Namespace) -> int:
    """`arena envs list`."""
    quiet_logs()
    rows: list[dict[str, Any]] = []
    for name, path in discover(env_path_of(args)).items():
        try:
            rows.append(summary(load_environment(path)))
        except EnvLoadError as exc:
            rows.append(
                {"name": name, "path": str(path), "ok": False, "problems": [str(p) for p in exc.problems]}
            )
    if args.json:
        print(json.dumps(rows, indent=2, ensure_ascii=False))
        return 0
    if not rows:
        print("no environments found (add folders with --env-path or ARENA_ENV_PATH)")
        return 0
    width = max(len(r["name"]) for r in rows)
    for r in rows:
        if not r["ok"]:
            print(
                f"{r['name']:<{width}}  BROKEN ({len(r['problems'])} problems: arena envs check {r['name']})"
            )
            continue
        tools = f"{r['tools']} tools ({len(r['write_tools'])} write)"
        print(
            f"{r['name']:<{width}}  {r['kind']:<10}  {r['origin']:<11}  {tools:<20}  "
            f"{' / '.join(r['category'])}: {r['title']}"
        )
    data_dir = daemon_config(args).data.dir
    print(_public_line(data_dir))
    print(_tau2_line(data_dir))
    return 0


def _public_line(data_dir: Path) -> str:
    """The imported BFCL benchmark, held out of every phase (`arena envs import-bfcl`)."""
    from arena.public.bfcl.model import SUBDIR, env_name, load_benchmark

    try:
        bench = load_benchmark(data_dir / SUBDIR)
    except (FileNotFoundError, ValueError) as exc:
        return f"public benchmarks: none ({str(exc).split(':', 1)[0]})"
    envs = ", ".join(f"{env_name(c)} ({n} tasks)" for c, n in bench.manifest.categories.items())
    return f"public benchmarks (held out, never trained on; bfcl-eval {bench.version}): {envs}"


def _tau2_line(data_dir: Path) -> str:
    """The imported τ²-bench domains, held out of every phase (`arena envs import-tau2`)."""
    from arena.public.tau2.model import load_domain
    from ops.config_public import TAU2_DOMAINS

    found = []
    for name in TAU2_DOMAINS:
        try:
            domain = load_domain(data_dir, name)
        except (FileNotFoundError, ValueError):
            continue
        found.append(f"{name} ({len(domain.tasks)} tasks, {(domain.manifest.commit or 'no commit')[:12]})")
    if not found:
        return "τ²-bench: none imported (arena envs import-tau2 --from CHECKOUT --domain retail|airline)"
    return f"τ²-bench (held out, never trained on): {', '.join(found)}"


# ----------------------------------------------------------------------------------------- show


def _param_lines(schema: dict[str, Any], generated: dict[str, str] | None = None) -> list[str]:
    """One line per parameter; a description Arena wrote at import ends with `[generated: BY]`."""
    required = set(schema.get("required", []))
    generated = generated or {}
    lines = []
    for pname, prop in schema.get("properties", {}).items():
        kind = prop.get("type") or " | ".join(
            str(p.get("type", "?")) for p in prop.get("anyOf", []) if isinstance(p, dict)
        )
        if "enum" in prop:
            kind = " | ".join(json.dumps(v) for v in prop["enum"])
        if pname in required:
            extra = ""
        else:
            extra = f" = {json.dumps(prop['default'])}" if "default" in prop else " (optional)"
        mark = f"  [generated: {generated[pname]}]" if pname in generated else ""
        lines.append(f"      {pname}: {kind or 'any'}{extra}  {prop.get('description', '')}".rstrip() + mark)
    return lines


def cmd_show(args: argparse.Namespace) -> int:
    """`arena envs show ENV`."""
    quiet_logs()
    from simulate.param_descriptions import generated_marks

    env = load_or_fail(resolve_one(args.env, env_path_of(args)))
    card = env.card()
    marks = generated_marks(Path(env.path)) if env.kind == "simulated" else {}
    for t in card["tools"]:
        t["generated"] = marks.get(t["name"], {})  # parameter -> "helper" | "fallback"
    if args.json:
        print(json.dumps(card, indent=2, ensure_ascii=False))
        return 0
    print(f"{env.title} ({env.name})")
    print(f"  kind: {env.kind}   origin: {env.origin}   version: {env.version}   sandboxed: {env.sandboxed}")
    print(f"  category: {' / '.join(env.category)}")
    print(f"  path: {env.path}")
    print(f"  now: {env.now}")
    print("\nDescription:\n  " + env.description.strip().replace("\n", "\n  "))
    if env.rules.strip():
        print("\nRules:\n  " + env.rules.strip().replace("\n", "\n  "))
    print(f"\nTools ({len(card['tools'])}):")
    for t in card["tools"]:
        print(f"  {t['name']}{'  [writes]' if t['writes'] else ''}")
        print(f"      {t['description'].splitlines()[0] if t['description'] else ''}")
        print("\n".join(_param_lines(t["parameters"], t["generated"])) or "      (no arguments)")
    if marks:
        print(
            "\n[generated: BY]: a description the source lacked, written at import by the helper or the fallback"
        )
    return 0


# ---------------------------------------------------------------------------------------- check


def check_targets(targets: list[str], env_path: list[Path]) -> list[tuple[str, Path | None, list[Problem]]]:
    """(label, folder, problems-finding-it) for every target; no targets means every known one."""
    if not targets:
        return [(name, path, []) for name, path in discover(env_path).items()]
    out: list[tuple[str, Path | None, list[Problem]]] = []
    known: dict[str, Path] | None = None
    for target in targets:
        as_path = Path(target)
        if as_path.is_dir():
            dirs = env_dirs_in(as_path)
            if not dirs:
                out.append(
                    (target, None, [Problem(path=target, message="no env.toml here or in its sub-folders")])
                )
            out.extend((str(d), d, []) for d in dirs)
            continue
        known = known if known is not None else discover(env_path)
        if target in known:
            out.append((target, known[target], []))
        else:
            out.append((target, None, [Problem(path=target, message="no such environment name or folder")]))
    return out


async def check_one(
    label: str, path: Path | None, found: list[Problem], sandbox: ToolSandbox | None = None
) -> dict[str, Any]:
    """Validate one folder and run its tool tests (in `sandbox` when it must); a JSON-ready record."""
    record: dict[str, Any] = {
        "env": label,
        "path": str(path) if path else None,
        "ok": False,
        "problems": [p.model_dump() for p in found],
        "gate": None,
    }
    if path is None:
        return record
    try:
        env = load_environment(path)
        record.update(env=env.name, kind=env.kind, version=env.version)
        if env.kind == "simulated":
            record["ok"] = True  # nothing to execute: validation is the whole check
            return record
        if env.sandboxed:
            if sandbox is None:
                message = "must run in the sandbox, and arena.sandbox is not available"
                record["problems"] = [Problem(path=str(path), message=message).model_dump()]
                return record
            await env.describe(sandbox)
        report = await run_tool_tests(env, sandbox=sandbox if env.sandboxed else None)
        tools = env.tools if not env.sandboxed else None
        tasks = load_tasks(path, env.name, tools=tools, write_tools=env.write_tools)
    except EnvLoadError as exc:
        record["problems"] = [p.model_dump() for p in exc.problems]
        return record
    gated = await gate_tasks(env, tasks, sandbox=sandbox)
    record["gate"] = report.model_dump()
    record["tasks"] = [t.model_dump() for t in gated]
    record["ok"] = report.ok and all(t.ok for t in gated)
    return record


def _needs_sandbox(targets: list[tuple[str, Path | None, list[Problem]]]) -> bool:
    for _, path, _ in targets:
        if path is None:
            continue
        try:
            if load_environment(path).sandboxed:  # cached: the real check reuses this load
                return True
        except EnvLoadError:
            continue
    return False


async def check_all(targets: list[tuple[str, Path | None, list[Problem]]]) -> list[dict[str, Any]]:
    """Check every target; one sandbox pool serves all the environments that need it."""
    if _needs_sandbox(targets):
        try:
            from arena.sandbox import SandboxPool
        except ImportError:
            pass
        else:
            async with SandboxPool() as pool:
                return [await check_one(label, path, found, pool) for label, path, found in targets]
    return [await check_one(label, path, found) for label, path, found in targets]


def _print_record(r: dict[str, Any]) -> None:
    if r["problems"]:
        print(f"{r['env']}: FAIL, {len(r['problems'])} problem{'s' if len(r['problems']) > 1 else ''}")
        for p in r["problems"]:
            print(f"  {Problem.model_validate(p)}")
        return
    gate = r["gate"]
    if gate is None:
        print(f"{r['env']}: ok ({r.get('kind', '')}, validated)")
        return
    cases = gate["cases"]
    passed = sum(c["passed"] for c in cases)
    status = "ok" if r["ok"] else "FAIL"
    n_tools = len(gate["tools"])
    print(
        f"{r['env']}: {status}, {len(gate['kept_tools'])}/{n_tools} tools kept, "
        f"{passed}/{len(cases)} cases passed" + (f" ({gate['reason']})" if gate["reason"] else "")
    )
    tasks = r.get("tasks", [])
    if tasks:
        bad = [t for t in tasks if not t["ok"]]
        print(f"  tasks: {len(tasks) - len(bad)}/{len(tasks)} pass the gold and adversary gates")
        for t in bad:
            why = f"gold gate: {t['gold']}" if not t["gold_ok"] else f"adversary gate: {t['adversary']}"
            print(f"  task {t['task']}: {why}")
    for t in gate["tools"]:
        if not t["kept"]:
            print(f"  dropped {t['tool']}: {t['reason']}")
    tests_file = Path(r["path"]) / "tests.toml"
    for c in cases:
        if not c["passed"]:
            where = f"{tests_file}:{c['line']}" if c["line"] else str(tests_file)
            print(f"  {where}: {c['label']}: {c['reason']}")


def cmd_check(args: argparse.Namespace) -> int:
    """`arena envs check [ENV|PATH ...]`."""
    quiet_logs()
    targets = check_targets(args.targets, env_path_of(args))
    if not targets:
        raise CliError("no environments to check (add folders with --env-path or ARENA_ENV_PATH)")

    records = anyio.run(check_all, targets)
    ok = all(r["ok"] for r in records)
    if args.json:
        print(json.dumps({"ok": ok, "environments": records}, indent=2, ensure_ascii=False, default=str))
    else:
        for r in records:
            _print_record(r)
        failed = sum(not r["ok"] for r in records)
        print(f"\n{len(records) - failed}/{len(records)} environments passed")
    return 0 if ok else 1


def register(cli: Cli) -> None:
    """Add `arena envs list|show|check`."""
    group = cli.group("envs", help="list, inspect and check environments")
    parent = env_path_parent()
    p = group.add_parser("list", parents=[parent], help="list every known environment")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_list)
    p = group.add_parser("show", parents=[parent], help="describe one environment and its tools")
    p.add_argument("env", metavar="ENV", help="an environment name or folder")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_show)
    p = group.add_parser(
        "check",
        parents=[parent],
        help="validate environment folders and run their tool unit tests (the gate)",
    )
    p.add_argument(
        "targets", nargs="*", metavar="ENV|PATH", help="names or folders (default: every known one)"
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_check)
