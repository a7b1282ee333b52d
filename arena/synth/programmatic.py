"""Programmatic tasks (Agent-World): the helper writes a task, a solution program and a check.

The solution `solve(payload, tools)` calls the environment's tools with loops, conditions and
aggregation and returns the final answer; it runs in the sandbox on a copy of the environment's
database (`SandboxPool.execute_program`). When it fails, its error goes back to the helper for a
repair (at most `max_repairs`). The calls it made successfully become the reference solution, its
return value the reference answer, and the check `check(initial, final, answer) -> bool` a
`python` check (always run in the sandbox). Every task then passes the usual gates.
"""

from __future__ import annotations

import json
import random
import re
import time
from typing import Any

import structlog
from pydantic import BaseModel, ValidationError

from arena.difficulty import Difficulty
from arena.env.state import to_image
from arena.protocols import ChatModel, ModelError
from arena.synth.cost import ReportObserver, StageMeter, SynthesisReport
from arena.synth.filters import GateConfig, TaskFilter
from arena.synth.graph_tasks import SynthesisResult, task_id
from arena.synth.writer import SCHEMA_WORDS
from arena.tasks.model import Check, PythonCheck, StateMatchCheck, Task
from arena.types import Message, SamplingParams, ToolCall

log = structlog.get_logger(__name__)

_SCHEMA = {
    "type": "object",
    "properties": {
        "instruction": {"type": "string"},
        "solution": {"type": "string"},
        "check": {"type": "string"},
    },
    "required": ["instruction", "solution", "check"],
}


class ProgramDraft(BaseModel):
    """What the helper must return."""

    instruction: str
    solution: str
    check: str


def _tool_lines(env: Any) -> str:
    lines = []
    for spec in env.tool_specs:
        props = spec.parameters.get("properties", {})
        required = set(spec.parameters.get("required", []))
        params = ", ".join(f"{k}{'' if k in required else '?'}" for k in props)
        kind = "write" if spec.name in env.write_tools else "read"
        lines.append(
            f"- {spec.name}({params}) [{kind}]: {spec.description.splitlines()[0] if spec.description else ''}"
        )
    return "\n".join(lines)


def program_prompt(env: Any, difficulty: Difficulty, rng: random.Random) -> str:
    """The first request to the helper for one programmatic task."""
    focus = rng.choice(
        ["a loop over several records", "a condition on looked-up values", "an aggregate (count, sum, max)"]
    )
    return (
        f"Environment: {env.title}. {env.description.strip()}\nRules for the assistant:\n{env.rules.strip()}\n"
        f"Tools (call as tools.NAME(**arguments); a failed call raises arena.env.ToolError):\n{_tool_lines(env)}\n\n"
        f"Write one realistic task for the logged-in user that needs {focus} and about "
        f"{max(2, difficulty.walk_length)} tool calls. Return JSON with:\n"
        '- "instruction": what the user says (first person, no tool names),\n'
        '- "solution": Python source defining solve(payload, tools) that performs the task and returns the final '
        "answer as a string,\n"
        '- "check": Python source defining check(initial, final, answer) -> bool over two sqlite3 connections '
        "(the database before and after) and the final answer; it must fail when nothing was done."
    )


def parse_draft(text: str, env: Any) -> ProgramDraft:
    """The helper's JSON as a draft; ValueError naming the problem."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON: {exc.msg}") from None
    try:
        draft = ProgramDraft.model_validate(data)
    except ValidationError as exc:
        raise ValueError(f"missing or bad fields: {exc.errors()[0]['loc']}") from None
    for name, source, entry in (("solution", draft.solution, "solve"), ("check", draft.check, "check")):
        try:
            compile(source, f"<{name}>", "exec")
        except SyntaxError as exc:
            raise ValueError(f"{name} does not compile: {exc.msg} (line {exc.lineno})") from None
        if not re.search(rf"^def\s+{entry}\s*\(", source, re.MULTILINE):
            raise ValueError(f"{name} must define `def {entry}(...)`")
    low = draft.instruction.lower()
    if len(draft.instruction.strip()) < 15:
        raise ValueError("instruction is too short")
    for word in [*env.tool_names, *SCHEMA_WORDS]:
        if re.search(rf"\b{re.escape(word.lower())}s?\b", low):
            raise ValueError(f"instruction mentions {word!r}")
    return draft


async def _run_solution(env: Any, draft: ProgramDraft, sandbox: Any) -> Any:
    from arena.sandbox import ProgramEnv

    program_env = ProgramEnv(
        env_dir=str(env.path), db_image=to_image(env.template), now=env.now, user_id=env.user_id
    )
    return await sandbox.execute_program(draft.solution, "solve", {}, env=program_env)


async def synthesize_program_tasks(
    env: Any,
    n: int,
    *,
    helper: ChatModel,
    sandbox: Any,
    seed: int = 0,
    difficulty: Difficulty | None = None,
    max_repairs: int = 3,
    max_attempts: int | None = None,
    max_tokens: int = 1024,
    gates: GateConfig | None = None,
    round_id: int | None = None,
    on_report: ReportObserver | None = None,
) -> SynthesisResult:
    """Up to `n` gated programmatic tasks for an executable environment (needs a sandbox pool)."""
    from arena.sandbox import SandboxProgramError, SandboxViolation

    difficulty = difficulty or Difficulty()
    report = SynthesisReport(env=env.name, kind="program", requested=n)
    meter = StageMeter(report)
    started = time.perf_counter()
    gate = TaskFilter(env, gates, sandbox=sandbox, report=report)
    params = SamplingParams(max_tokens=max_tokens, temperature=0.7, json_schema=_SCHEMA)
    tasks: list[Task] = []
    budget = max_attempts if max_attempts is not None else n * 3
    for index in range(budget):
        if len(tasks) >= n:
            break
        report.attempts += 1
        rng = random.Random(f"{env.name}:{seed}:program:{index}")
        messages = [Message(role="user", content=program_prompt(env, difficulty, rng))]
        outcome = None
        draft: ProgramDraft | None = None
        problem: str | None = None
        with meter.timed("program") as cost:
            cost.attempted += 1
            for _ in range(1 + max_repairs):
                try:
                    completion = await meter.chat(helper, messages, params=params)
                except ModelError as exc:
                    problem = f"helper failed: {exc}"
                    break
                try:
                    draft = parse_draft(completion.text, env)
                    outcome = await _run_solution(env, draft, sandbox)
                    if not any(c.ok for c in outcome.calls):
                        raise ValueError("the solution made no successful tool call")
                    problem = None
                    break
                except (ValueError, SandboxProgramError, SandboxViolation) as exc:
                    problem = str(exc)[:1500]
                    outcome = None
                    # Self-correction: the error goes back with the failed answer.
                    messages = [
                        *messages,
                        Message(role="assistant", content=completion.text[:6000]),
                        Message(role="user", content=f"That failed: {problem}\nReturn the corrected JSON."),
                    ]
            if outcome is None or draft is None:
                report.reject("program")
                log.debug("program_rejected", env=env.name, problem=problem)
                continue
            cost.accepted += 1
        answer = "" if outcome.result is None else str(outcome.result)
        # The helper's check judges the answer itself: a literal match on the program's wording
        # would fail agents that phrase it differently.
        checks: list[Check] = [
            StateMatchCheck(),
            PythonCheck(name="program check", code=draft.check, sandbox=True),
        ]
        try:
            task = Task(
                id=task_id("p", seed, index),
                env=env.name,
                env_version=env.version,
                instruction=draft.instruction.strip(),
                answer=answer or "Done.",
                reference=[ToolCall(name=c.tool, arguments=c.arguments) for c in outcome.calls if c.ok],
                checks=checks,
                difficulty=difficulty.as_dict(),
                origin="program",
                round=round_id,
            )
        except ValidationError as exc:
            report.reject("program")
            log.debug("program_task_invalid", env=env.name, error=str(exc)[:300])
            continue
        if await gate.admit(task, meter):
            tasks.append(task)
    report.finish(len(tasks), started, on_report)
    return SynthesisResult(tasks=tasks, report=report)
