"""Replay τ² tasks' gold actions through tau2-bench's own environment (run in a side interpreter).

This file is a standalone program, never imported by Arena: Arena runs it with an interpreter that
has tau2-bench's dependencies and `CHECKOUT/src` on `PYTHONPATH` (README: "τ²-bench"), and reads
one JSON line per task from its stdout:

    {"task": id, "results": [{"name", "arguments", "requestor", "content", "error", "seconds"}, ...],
     "db_sha256": sha of the canonical JSON of the database after the replay,
     "reset_s": seconds of one environment reset (tau2's `get_environment()`),
     "verify_s": seconds of tau2's environment check of the gold trajectory
                 (`EnvironmentEvaluator.calculate_reward`: two environments, a replay, two hashes)}

`--db-json TASK` prints that task's end-state database as canonical JSON instead (to show a
difference). Only the standard library and tau2-bench are used.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import sys
import time


def _canonical(db: object) -> str:
    return json.dumps(db, sort_keys=True, separators=(",", ":"))


def _load(domain: str):
    module = importlib.import_module(f"tau2.domains.{domain}.environment")
    tasks = (
        module.get_tasks(None)
        if "task_split_name" in module.get_tasks.__code__.co_varnames
        else module.get_tasks()
    )
    return module.get_environment, tasks


def _replay(get_environment, task):
    from tau2.data_model.message import AssistantMessage, ToolCall

    env = get_environment()
    state = task.initial_state
    if state is not None:
        env.set_state(
            initialization_data=state.initialization_data,
            initialization_actions=state.initialization_actions,
            message_history=list(state.message_history or []),
        )
    results, trajectory = [], list(state.message_history or []) if state is not None else []
    for n, action in enumerate(task.evaluation_criteria.actions or []):
        call = ToolCall(
            id=f"gold-{n}", name=action.name, arguments=action.arguments, requestor=action.requestor
        )
        start = time.perf_counter()
        reply = env.get_response(call)
        seconds = time.perf_counter() - start
        results.append(
            {
                "name": action.name,
                "arguments": action.arguments,
                "requestor": action.requestor,
                "content": reply.content,
                "error": reply.error,
                "seconds": seconds,
            }
        )
        role = "user" if action.requestor == "user" else "assistant"
        if role == "assistant":
            trajectory.append(AssistantMessage(role="assistant", content=None, tool_calls=[call]))
            trajectory.append(reply)
    return env, results, trajectory


def main(argv: list[str] | None = None) -> int:
    """Replay the gold actions of a domain's tasks; one JSON line per task on stdout."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--domain", required=True)
    parser.add_argument("--tasks", default="", help="comma-separated task ids (default: all)")
    parser.add_argument("--db-json", default=None, help="print this task's end state instead")
    parser.add_argument("--no-timing", action="store_true", help="skip the reset and check timings")
    args = parser.parse_args(argv)

    from loguru import logger

    logger.remove()  # tau2 logs every tool response at DEBUG on stderr
    from tau2.evaluator.evaluator_env import EnvironmentEvaluator

    get_environment, tasks = _load(args.domain)
    wanted = {t for t in args.tasks.split(",") if t}
    for task in tasks:
        if args.db_json is not None and task.id != args.db_json:
            continue
        if wanted and task.id not in wanted:
            continue
        env, results, trajectory = _replay(get_environment, task)
        db = env.tools.db.model_dump()
        if args.db_json is not None:
            print(_canonical(db))
            return 0
        line = {
            "task": task.id,
            "results": results,
            "db_sha256": hashlib.sha256(_canonical(db).encode()).hexdigest(),
        }
        if not args.no_timing:
            start = time.perf_counter()
            get_environment()
            line["reset_s"] = time.perf_counter() - start
            start = time.perf_counter()
            EnvironmentEvaluator.calculate_reward(get_environment, task, trajectory)
            line["verify_s"] = time.perf_counter() - start
        print(json.dumps(line), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
