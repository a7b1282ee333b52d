"""Tasks ready for training and evaluation: environment, expected state and system prompt per task.

Every episode of a task needs the same three things besides the policy: a fresh instance of its
environment, the reference solution's final state (for `state_match`, computed once per task), and
the system prompt built from the environment's rules. `prepare_tasks` resolves them once, so the
GRPO rollouts, the SFT warm-up, every evaluation and the learning benchmark all use the same
prompts and history.
"""

from __future__ import annotations

import hashlib
import json
import random
import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import structlog

from arena.episode.prompts import build_system_prompt, system_prompt_for
from arena.tasks.model import StateMatchCheck, Task
from arena.tasks.replay import ReferenceReplayError, reference_state

log = structlog.get_logger(__name__)


@dataclass
class PreparedTask:
    """A task with what its episodes need."""

    task: Task
    env: Any  # arena.env.runtime.Environment
    expected_state: sqlite3.Connection | None
    system_prompt: str

    @property
    def key(self) -> str:
        """`ENV/ID`, unique across environments."""
        return self.task.full_id

    @property
    def fingerprint(self) -> str:
        """`ENV/ID@digest` of everything an episode of it depends on: the task (instruction,
        reference, checks), the system prompt and the tools shown. An edited check or tool
        description gives another fingerprint, so a stored evaluation of the old one is not reused.
        """
        body = json.dumps(
            {
                "task": self.task.model_dump(mode="json"),
                "system_prompt": self.system_prompt,
                "tools": [t.openai() for t in self.env.tool_specs],
            },
            sort_keys=True,
        )
        return f"{self.key}@{hashlib.sha256(body.encode()).hexdigest()[:16]}"


class UnknownEnvironment(ValueError):
    """A task names an environment that is not loaded."""


def resolve_envs(tasks: Sequence[Task], envs: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The environments of `tasks`: from `envs`, else from the registry (bundled + ARENA_ENV_PATH)."""
    if envs is not None:
        missing = sorted({t.env for t in tasks} - set(envs))
        if missing:
            raise UnknownEnvironment(f"tasks name environments that were not given: {', '.join(missing)}")
        return dict(envs)
    from arena.env.registry import Registry

    registry = Registry()
    out: dict[str, Any] = {}
    for name in sorted({t.env for t in tasks}):
        try:
            out[name] = registry.get(name)
        except Exception as exc:
            raise UnknownEnvironment(f"environment {name!r} of the tasks cannot be loaded: {exc}") from exc
    return out


def policy_prompt(env: Any, mode: Any, style: str = "full") -> str:
    """The system prompt: the environment's full prompt, or a compact one without its rules."""
    if style == "compact":
        return build_system_prompt(title=env.title, description=env.description, now=env.now, mode=mode)
    return system_prompt_for(env, mode)


def tool_view(env: Any, task: Task, distractors: int | None) -> Any:
    """The environment restricted to the task's reference tools plus `distractors` others.

    The distractors are drawn deterministically from the task id, and the tools keep the
    environment's order, so the position of a tool gives nothing away.
    """
    if distractors is None or env.kind != "executable":
        return env
    wanted = [c.name for c in task.reference if c.name in env.tool_names]
    others = sorted(n for n in env.tool_names if n not in wanted)
    rng = random.Random(task.full_id)
    chosen = set(wanted) | set(rng.sample(others, min(distractors, len(others))))
    return env.restrict([n for n in env.tool_names if n in chosen])


async def prepare_tasks(
    tasks: Sequence[Task],
    envs: Mapping[str, Any] | None = None,
    *,
    sandbox: Any = None,
    system_prompt: str = "full",
    tool_subset: int | None = None,
) -> tuple[list[PreparedTask], list[str]]:
    """Prepare `tasks`; returns the prepared ones and a line per skipped task (why it was skipped).

    A task is skipped when its reference solution does not replay (its `state_match` would have
    no expected state). `system_prompt` and `tool_subset` are what the policy is shown (an
    `EpisodeView`'s fields, `TrainerConfig`'s knobs of the same names), identical wherever these
    tasks are used.
    """
    resolved = resolve_envs(tasks, envs)
    if sandbox is not None:
        # A synthesized environment learns its tools' schemas from a sandbox worker: before that
        # the policy would be shown no tools at all.
        for name in sorted({t.env for t in tasks}):
            if resolved[name].sandboxed:
                await resolved[name].describe(sandbox)
    prepared: list[PreparedTask] = []
    skipped: list[str] = []
    seen: set[str] = set()
    for task in tasks:
        if task.full_id in seen:
            continue
        seen.add(task.full_id)
        env = tool_view(resolved[task.env], task, tool_subset)
        expected = None
        if any(isinstance(c, StateMatchCheck) for c in task.checks):
            try:
                expected = await reference_state(env, task, sandbox=sandbox)
            except ReferenceReplayError as exc:
                skipped.append(f"{task.full_id}: {exc}")
                continue
        prepared.append(PreparedTask(task, env, expected, policy_prompt(env, task.mode, system_prompt)))
    if skipped:
        log.warning("trainer.tasks_skipped", skipped=len(skipped), first=skipped[0])
    return prepared, skipped
