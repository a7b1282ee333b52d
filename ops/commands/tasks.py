"""`arena tasks list ENV` and `arena tasks replay ENV/ID`: hand-written tasks and their gates.

`replay` runs the task's reference solution on a fresh instance, verifies it (the gold gate:
every check must pass) and verifies an episode that does nothing (the empty gate: it must not
pass). It exits 0 when both gates hold, 1 when one fails, 2 on bad input.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import anyio
import anyio.to_thread

from arena.env.errors import EnvLoadError
from arena.env.runtime import Environment
from arena.protocols import ChatModel, ModelError
from arena.tasks.gates import GateReport, GateResult, run_gates
from arena.tasks.model import PythonCheck, Task, split_task_id
from arena.tasks.toml_io import load_tasks
from arena.tasks.verify import must_sandbox
from ops.cli import Cli, CliError
from ops.commands.envs import env_path_of, env_path_parent, load_or_fail, quiet_logs, resolve_one


def _env_and_tasks(target: str, args: argparse.Namespace) -> tuple[Environment, list[Task]]:
    env = load_or_fail(resolve_one(target, env_path_of(args)))
    try:
        tasks = load_tasks(env.path, env.name, tools=env.tools if env.kind == "executable" else None)
    except EnvLoadError as exc:
        first = exc.problems[0] if exc.problems else "unreadable"
        more = f" (and {len(exc.problems) - 1} more)" if len(exc.problems) > 1 else ""
        raise CliError(f"tasks of {env.name} are broken: {first}{more}") from None
    for task in tasks:
        task.env_version = env.version
    return env, tasks


def _checks_summary(task: Task) -> str:
    return ", ".join(c.kind for c in task.checks)


def cmd_list(args: argparse.Namespace) -> int:
    """`arena tasks list ENV [--json]`."""
    quiet_logs()
    env, tasks = _env_and_tasks(args.env, args)
    if args.json:
        print(
            json.dumps(
                [{"full_id": t.full_id, **t.model_dump(mode="json")} for t in tasks],
                indent=2,
                ensure_ascii=False,
            )
        )
        return 0
    if not tasks:
        print(f"{env.name} has no hand-written tasks (no tasks.toml in {env.path})")
        return 0
    width = max(len(t.full_id) for t in tasks)
    for t in tasks:
        instruction = t.instruction if len(t.instruction) <= 70 else t.instruction[:67] + "..."
        print(
            f"{t.full_id:<{width}}  {t.mode:<14}  {len(t.reference)} calls  [{_checks_summary(t)}]  {instruction}"
        )
    return 0


async def _load_judge(spec: str) -> ChatModel:
    from simulate.local import LocalChatModel

    try:
        return await anyio.to_thread.run_sync(lambda: LocalChatModel.load(spec, role="judge"))
    except ModelError as exc:
        raise CliError(f"cannot load the judge model: {exc}") from None


def _needs_sandbox(env: Environment, task: Task) -> bool:
    return env.sandboxed or any(isinstance(c, PythonCheck) and must_sandbox(task, c) for c in task.checks)


async def _replay(env: Environment, task: Task, judge_spec: str) -> GateReport:
    judge = await _load_judge(judge_spec) if task.needs_judge else None
    if not _needs_sandbox(env, task):
        return await run_gates(env, task, judge=judge)
    from arena.sandbox.pool import SandboxPool
    from arena.sandbox.process import SandboxStartError

    try:
        async with SandboxPool(workers=1) as pool:
            return await run_gates(env, task, judge=judge, sandbox=pool)
    except SandboxStartError as exc:
        raise CliError(f"cannot start the sandbox this task needs: {exc}") from None


def _gate_json(result: GateResult) -> dict[str, Any]:
    return result.model_dump(mode="json")


def _print_gate(title: str, result: GateResult) -> None:
    print(f"{title}: {'ok' if result.ok else 'FAILED'} — {result.detail}")
    if result.verdict is None:
        return
    for check in result.verdict.checks:
        mark = "✓" if check.passed else "✗"
        detail = "" if check.detail == check.name else f": {check.detail}"
        print(f"  {mark} {check.kind:<11} {check.name}{detail}")


def cmd_replay(args: argparse.Namespace) -> int:
    """`arena tasks replay ENV/ID [--json]`."""
    quiet_logs()
    try:
        env_name, task_id = split_task_id(args.task_id)
    except ValueError as exc:
        raise CliError(str(exc)) from None
    env, tasks = _env_and_tasks(env_name, args)
    task = next((t for t in tasks if t.id == task_id), None)
    if task is None:
        known = ", ".join(t.id for t in tasks) or "(none)"
        raise CliError(f"environment {env.name} has no task {task_id!r} (tasks: {known})")
    report = anyio.run(_replay, env, task, args.judge)
    if args.json:
        out = {
            "task": report.task,
            "ok": report.ok,
            "gold": _gate_json(report.gold),
            "adversary": _gate_json(report.adversary),
        }
        print(json.dumps(out, indent=2, ensure_ascii=False))
    else:
        print(f"{task.full_id}: {task.instruction}")
        gold = report.gold.verdict
        print(f"reference replay: {gold.summary() if gold else 'not verified'}")
        _print_gate("gold gate", report.gold)
        _print_gate("adversary gate", report.adversary)
        for agent in report.adversary.agents:
            outcome = f"earns {agent.reward:.2f}" if agent.applies else "does not apply"
            print(
                f"  {'✗' if agent.paid else '✓'} {agent.agent:<16} {outcome}: {agent.error or agent.detail}"
            )
    return 0 if report.ok else 1


def register(cli: Cli) -> None:
    """Add `arena tasks list` and `arena tasks replay`."""
    group = cli.group("tasks", help="hand-written tasks: list them, replay their reference solutions")
    parent = env_path_parent()
    p = group.add_parser(
        "list",
        parents=[parent],
        help="list an environment's tasks",
        description="List an environment's tasks.",
    )
    p.add_argument("env", metavar="ENV", help="environment name (or folder)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_list)
    p = group.add_parser(
        "replay",
        parents=[parent],
        help="replay a task's reference solution and print the verdict",
        description="Replay a task's reference solution, verify it (gold gate) and an empty episode (empty gate).",
    )
    p.add_argument("task_id", metavar="TASK_ID", help="ENV/ID, e.g. hotels/cancel-harbor-view-june-20")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument(
        "--judge",
        default="embedded",
        metavar="MODEL",
        help="judge for rubric checks: a model folder or 'embedded' (default); loaded only when needed",
    )
    p.set_defaults(func=cmd_replay)
