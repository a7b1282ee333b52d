"""Synthesis commands: `arena tasks synthesize`, `arena envs synthesize`, `arena envs complexify`,
`arena bench synth`.

The helper model (for `--writer model` and environment synthesis) is built here from
`simulate.backends` — the embedded model unless `--helper` names a model folder.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import structlog

from arena.difficulty import KNOBS, Difficulty
from arena.env.registry import bundled_env_dirs
from arena.env.runtime import Environment
from arena.protocols import ChatModel, ModelError
from ops.cli import Cli, CliError
from ops.commands.envs import (
    daemon_config,
    env_path_of,
    env_path_parent,
    load_or_fail,
    quiet_logs,
    resolve_one,
)


def quiet() -> None:
    """Logs to stderr, warnings only, unless logging is configured already (the daemon)."""
    if structlog.is_configured():
        return
    quiet_logs()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))


def parse_difficulty(text: str) -> Difficulty:
    """`walk_length=3,ambiguity=1` -> Difficulty; a clear error for unknown knobs or bad levels."""
    values: dict[str, int] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, sep, raw = part.partition("=")
        name = name.strip()
        if not sep or name not in KNOBS:
            raise CliError(
                f"bad --difficulty entry {part!r}: use KNOB=LEVEL with KNOB one of {', '.join(KNOBS)}"
            )
        spec = KNOBS[name]  # type: ignore[index]
        try:
            level = int(raw)
        except ValueError:
            raise CliError(f"bad --difficulty level {raw!r} for {name}: an integer is needed") from None
        if not spec.min_level <= level <= spec.max_level:
            raise CliError(f"--difficulty {name}={level} is out of range {spec.min_level}..{spec.max_level}")
        values[name] = level
    return Difficulty(**values)


async def load_helper(spec: str) -> ChatModel:
    """The helper model: 'embedded' (default) or a local model folder."""
    from simulate.backends import ModelSpec, build_chat_model

    try:
        # device auto: the command line's helper runs on the best device there is (the daemon's
        # settings default to cpu).
        helper = ModelSpec(model=spec, device="auto")
        return await anyio.to_thread.run_sync(lambda: build_chat_model(helper, role="helper"))
    except (ModelError, ValueError, OSError) as exc:
        raise CliError(f"cannot load the helper model {spec!r}: {exc}") from None


def distractor_pool(exclude: str) -> list[str]:
    """`ENV/TOOL` names of the other bundled environments (distractor tools)."""
    from arena.env.loader import load_environment

    pool: list[str] = []
    for d in bundled_env_dirs():
        other = load_environment(d)
        if other.name != exclude:
            pool.extend(f"{other.name}/{name}" for name in other.tool_names)
    return pool


def _executable(env: Environment) -> Environment:
    if env.kind != "executable":
        raise CliError(
            f"environment {env.name} is {env.kind}: graph synthesis needs an executable environment"
        )
    return env


async def _synthesize(env: Environment, args: argparse.Namespace, difficulty: Difficulty) -> Any:
    from arena.synth.graph_tasks import synthesize_graph_tasks

    helper = await load_helper(args.helper) if args.writer == "model" else None
    pool = distractor_pool(env.name) if difficulty.distractors else []
    if env.sandboxed:
        from arena.sandbox import SandboxPool

        async with SandboxPool() as sandbox:
            await env.describe(sandbox)
            return await synthesize_graph_tasks(
                env,
                args.n,
                seed=args.seed,
                difficulty=difficulty,
                helper=helper,
                writer=args.writer,
                sandbox=sandbox,
                distractor_pool=pool,
            )
    return await synthesize_graph_tasks(
        env,
        args.n,
        seed=args.seed,
        difficulty=difficulty,
        helper=helper,
        writer=args.writer,
        distractor_pool=pool,
    )


def cmd_tasks_synthesize(args: argparse.Namespace) -> int:
    """`arena tasks synthesize --env ENV --n 50 [--json] [--writer template|model] [--seed S]`."""
    quiet()
    if args.n < 1 or args.n > 10_000:
        raise CliError(f"--n must be between 1 and 10000, got {args.n}")
    difficulty = parse_difficulty(args.difficulty)
    env = _executable(load_or_fail(resolve_one(args.env, env_path_of(args))))
    result = anyio.run(_synthesize, env, args, difficulty)
    if args.json:
        out = {
            "env": env.name,
            "kept": len(result.tasks),
            "report": result.report.summary(),
            "tasks": [t.model_dump(mode="json") for t in result.tasks],
        }
        print(json.dumps(out, indent=2, ensure_ascii=False))
    else:
        for t in result.tasks:
            calls = " -> ".join(c.name for c in t.reference)
            print(f"{t.full_id}  [{calls}]  {t.instruction}")
        rep = result.report
        print(
            f"kept {rep.kept}/{rep.requested} after {rep.attempts} candidates in {rep.seconds:.2f}s; "
            f"rejections: {json.dumps(rep.rejections)}; adversary gate per agent: {json.dumps(rep.adversaries)}",
            file=sys.stderr,
        )
    return 0 if result.tasks else 1


def next_version_dir(root: Path, name: str) -> Path:
    """`ROOT/NAME.v001`, `.v002`, ...: the next free version folder (sorted names load last-wins)."""
    n = 1
    while (root / f"{name}.v{n:03d}").exists():
        n += 1
    return root / f"{name}.v{n:03d}"


def cmd_envs_complexify(args: argparse.Namespace) -> int:
    """`arena envs complexify ENV [--rows N] [--seed S] [--out DIR] [--json]`."""
    quiet()
    from arena.synth.complexify import ComplexifyError, complexify

    if not 1 <= args.rows <= 10_000:
        raise CliError(f"--rows must be between 1 and 10000, got {args.rows}")
    env = _executable(load_or_fail(resolve_one(args.env, env_path_of(args))))
    out = Path(args.out) if args.out else next_version_dir(daemon_config(args).envs_dir, env.name)
    if out.exists():
        raise CliError(f"output folder {out} already exists")

    async def run() -> Any:
        if env.sandboxed:
            from arena.sandbox import SandboxPool

            async with SandboxPool() as sandbox:
                await env.describe(sandbox)
                return await complexify(env, out, rows=args.rows, seed=args.seed, sandbox=sandbox)
        return await complexify(env, out, rows=args.rows, seed=args.seed)

    try:
        result = anyio.run(run)
    except ComplexifyError as exc:
        raise CliError(str(exc)) from None
    if args.json:
        print(result.model_dump_json(indent=2))
    else:
        added = ", ".join(f"{t} +{n}" for t, n in result.added.items())
        print(f"{env.name}: {sum(result.added.values())} rows added ({added})")
        for table, why in result.reverted.items():
            print(f"  kept {table} unchanged: {why}")
        print(
            f"new version {result.version_after[:12]} at {out} (add its parent to ARENA_ENV_PATH to use it)"
        )
    return 0


def cmd_envs_synthesize(args: argparse.Namespace) -> int:
    """`arena envs synthesize "THEME" --out DIR [--helper MODEL] [--max-tries N] [--json]`."""
    quiet()
    from arena.synth.envgen import synthesize_environment

    theme = args.theme.strip()
    if not 3 <= len(theme) <= 500:
        raise CliError('THEME must be 3 to 500 characters, e.g. "a neighbourhood tool library"')
    if not 1 <= args.max_tries <= 10:
        raise CliError("--max-tries must be between 1 and 10")
    out = Path(args.out)
    if out.exists():
        raise CliError(f"output folder {out} already exists")

    async def run() -> Any:
        from arena.sandbox import SandboxPool

        helper = await load_helper(args.helper)
        async with SandboxPool() as sandbox:
            return await synthesize_environment(
                theme,
                out,
                helper=helper,
                sandbox=sandbox,
                max_tries=args.max_tries,
                max_tokens=args.max_tokens,
            )

    result = anyio.run(run)
    if args.json:
        print(result.model_dump_json(indent=2))
    else:
        for step in result.steps:
            print(
                f"{step.step:<12} {'ok' if step.ok else 'FAILED'} after {step.tries} tries"
                + (f": {step.error}" if step.error else "")
            )
        if result.ok:
            print(f"environment {result.name} written to {out} (check it with: arena envs check {out})")
        else:
            print(f"no environment written: {result.problem}", file=sys.stderr)
    return 0 if result.ok else 1


def cmd_bench_synth(args: argparse.Namespace) -> int:
    """`arena bench synth [--json] [--n N]`."""
    quiet()
    from arena.env.loader import load_environment
    from arena.synth.bench import bench_synth

    if args.n < 1:
        raise CliError("--n must be at least 1")
    envs = [e for e in (load_environment(d) for d in bundled_env_dirs()) if e.kind == "executable"]
    if args.env:
        envs = [e for e in envs if e.name in set(args.env)]
        if not envs:
            raise CliError(f"no bundled environment named {', '.join(args.env)}")
    report = anyio.run(lambda: bench_synth(envs, n=args.n, seed=args.seed))
    if args.json:
        print(report.model_dump_json(indent=2))
    else:
        for e in report.envs:
            print(f"{e.env:<16} kept {e.kept:>4}  {e.tasks_per_s:>8.1f} tasks/s  (graph {e.graph_s:.3f}s)")
        print(f"total: {report.kept} tasks in {report.seconds:.2f}s = {report.tasks_per_s} tasks/s")
    return 0


def register(cli: Cli) -> None:
    """Add the synthesis subcommands to the `tasks`, `envs` and `bench` groups."""
    parent = env_path_parent()
    p = cli.group("tasks").add_parser(
        "synthesize",
        parents=[parent],
        help="synthesize graph-based tasks for an environment (every kept task passes the gates)",
        description="Synthesize graph-based tasks: tool-graph walks executed on a private copy, "
        "instructions by the template or the helper model, gold/empty/stability/dedup gates.",
    )
    p.add_argument("--env", required=True, metavar="ENV", help="environment name or folder")
    p.add_argument("--n", type=int, default=50, help="how many tasks to keep (default 50)")
    p.add_argument("--seed", type=int, default=0, help="seed: same seed, same tasks (default 0)")
    p.add_argument("--writer", choices=("template", "model"), default="template", help="instruction writer")
    p.add_argument("--helper", default="embedded", metavar="MODEL", help="helper model for --writer model")
    p.add_argument(
        "--difficulty",
        default="",
        metavar="KNOB=L,...",
        help="e.g. walk_length=3,ambiguity=1 (defaults otherwise)",
    )
    p.add_argument("--json", action="store_true", help="print JSON (tasks and the synthesis report)")
    p.set_defaults(func=cmd_tasks_synthesize)

    p = cli.group("envs").add_parser(
        "complexify",
        parents=[parent],
        help="grow an environment's database into a new version (tool tests and tasks stay green)",
    )
    p.add_argument("env", metavar="ENV", help="environment name or folder")
    p.add_argument("--rows", type=int, default=20, help="about how many rows to add (default 20)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", metavar="DIR", help="new folder (default DATA_DIR/envs/ENV.vNNN)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_envs_complexify)

    p = cli.group("envs").add_parser(
        "synthesize",
        help="synthesize an executable environment from a theme with the helper model (AWM pipeline)",
    )
    p.add_argument(
        "theme", metavar="THEME", help='what the environment is about, e.g. "a neighbourhood tool library"'
    )
    p.add_argument("--out", required=True, metavar="DIR", help="the new environment folder (must not exist)")
    p.add_argument(
        "--helper", default="embedded", metavar="MODEL", help="helper model: 'embedded' or a folder"
    )
    p.add_argument("--max-tries", type=int, default=5, help="tries per step with error feedback (default 5)")
    p.add_argument("--max-tokens", type=int, default=2048, help="max tokens per helper answer")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_envs_synthesize)

    p = cli.group("bench").add_parser(
        "synth", help="graph-task synthesis throughput (template writer, gates included)"
    )
    p.add_argument("--n", type=int, default=50, help="tasks per bundled environment (default 50)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--env", action="append", default=[], help="only this bundled environment (repeatable)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_bench_synth)
