"""Parity with tau2-bench: every task's gold actions through Arena and through τ²'s own environment.

`arena bench tau2 --parity --from CHECKOUT --python SIDE_PYTHON` runs `side_replay.py` in a side
interpreter that has tau2-bench's dependencies (τ²'s code never runs in Arena's process: its
pinned dependencies stay out of Arena's venv), with `CHECKOUT/src` on its path, and replays the
same tasks through Arena's port. Per task it reports whether every tool result (content and error
flag) is equal, whether the end states are equal (sha256 of the canonical JSON of the database),
and whether the gold trajectory scores 1.0 under Arena's reward: the gold end state, the gold
calls, and the task's communicate values said by the agent. Natural-language assertions need a
conversation, which a gold replay has none of: they are counted apart (`nl_unjudged`).

The same run gives the side-by-side cost of an environment (`timing`): τ²'s reset (its
`get_environment()`) and its environment check of the gold trajectory, against Arena's reset
(`DocStore.copy`) and its check (the gold replay's state, cached per task, compared on the keys
either wrote).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import time
from pathlib import Path
from statistics import median
from typing import Any

from pydantic import BaseModel, Field

from arena.public.tau2.docstore import call_tool, same_end_state
from arena.public.tau2.domains import domain_tools
from arena.public.tau2.model import Tau2Domain, Tau2Task
from arena.public.tau2.replay import replay_gold
from arena.public.tau2.reward import score_task

SIDE_PROGRAM = Path(__file__).with_name("side_replay.py")


class CallDiff(BaseModel):
    """One gold call whose result differs between τ² and Arena."""

    index: int
    name: str
    tau2: str | None
    arena: str
    tau2_error: bool
    arena_error: bool


class TaskParity(BaseModel):
    """One task: results, end state and the gold trajectory's reward."""

    task: str
    calls: int
    results_equal: bool
    end_state_equal: bool
    gold_reward: float
    nl_unjudged: int = 0
    diffs: list[CallDiff] = Field(default_factory=list)


class EnvTiming(BaseModel):
    """Median seconds of a reset, a tool call and the environment check of an episode, each side.

    Arena's check compares with the gold replay's end state, which is replayed once per task and
    kept (`arena_verify_s`); `arena_verify_uncached_s` replays the gold actions every time, as τ²'s
    check does.
    """

    tau2_reset_s: float
    tau2_call_s: float
    tau2_verify_s: float
    arena_reset_s: float
    arena_call_s: float
    arena_verify_s: float
    arena_verify_uncached_s: float

    @property
    def reset_ratio(self) -> float:
        """How many times cheaper Arena's reset is."""
        return self.tau2_reset_s / self.arena_reset_s if self.arena_reset_s else float("inf")

    @property
    def verify_ratio(self) -> float:
        """How many times cheaper Arena's check is."""
        return self.tau2_verify_s / self.arena_verify_s if self.arena_verify_s else float("inf")

    @property
    def episode_ratio(self) -> float:
        """How many times cheaper an episode's reset and check together are in Arena."""
        arena = self.arena_reset_s + self.arena_verify_s
        return (self.tau2_reset_s + self.tau2_verify_s) / arena if arena else float("inf")


class ParityReport(BaseModel):
    """The whole comparison for one domain."""

    domain: str
    commit: str | None
    tasks: list[TaskParity]
    timing: EnvTiming | None = None

    @property
    def all_equal(self) -> bool:
        """Every task: equal results, equal end state, gold reward 1.0."""
        return all(t.results_equal and t.end_state_equal and t.gold_reward == 1.0 for t in self.tasks)

    def summary(self) -> dict[str, Any]:
        """Counts for the bench's JSON."""
        out: dict[str, Any] = {
            "domain": self.domain,
            "commit": self.commit,
            "tasks": len(self.tasks),
            "calls": sum(t.calls for t in self.tasks),
            "results_equal": sum(t.results_equal for t in self.tasks),
            "end_state_equal": sum(t.end_state_equal for t in self.tasks),
            "gold_reward_1": sum(t.gold_reward == 1.0 for t in self.tasks),
            "nl_assertions_unjudged": sum(t.nl_unjudged for t in self.tasks),
            "all_equal": self.all_equal,
        }
        if self.timing is not None:
            out["timing"] = self.timing.model_dump() | {
                "reset_ratio": round(self.timing.reset_ratio, 1),
                "verify_ratio": round(self.timing.verify_ratio, 1),
                "episode_ratio": round(self.timing.episode_ratio, 1),
            }
        return out


class SideError(RuntimeError):
    """The side interpreter failed (missing dependencies, a wrong checkout)."""


def side_lines(
    python: str, checkout: Path, domain: str, task_ids: list[str] | None, *, timing: bool, timeout_s: float
) -> list[dict[str, Any]]:
    """Run `side_replay.py` in the side interpreter; its JSON lines."""
    cmd = [python, str(SIDE_PROGRAM), "--domain", domain]
    if task_ids:
        cmd += ["--tasks", ",".join(task_ids)]
    if not timing:
        cmd.append("--no-timing")
    env = {**os.environ, "PYTHONPATH": str(checkout / "src"), "TAU2_DATA_DIR": str(checkout / "data")}
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout_s, check=False)
    except FileNotFoundError:
        raise SideError(f"no interpreter {python!r} (--python: one with tau2-bench's dependencies)") from None
    except subprocess.TimeoutExpired:
        raise SideError(f"the side interpreter ran past {timeout_s:.0f} s") from None
    if done.returncode != 0:
        tail = done.stderr.strip().splitlines()[-5:]
        raise SideError(f"the side interpreter failed (exit {done.returncode}): " + " | ".join(tail))
    return [json.loads(line) for line in done.stdout.splitlines() if line.strip()]


def compare_task(domain: Tau2Domain, task: Tau2Task, side: dict[str, Any]) -> TaskParity:
    """Replay one task through Arena and compare with the side's line for it."""
    gold = replay_gold(domain, task)
    diffs = []
    theirs = side.get("results", [])
    for i, mine in enumerate(gold.results):
        other = theirs[i] if i < len(theirs) else {}
        if other.get("content") != mine.content or bool(other.get("error")) != mine.error:
            diffs.append(
                CallDiff(
                    index=i,
                    name=mine.name,
                    tau2=other.get("content"),
                    arena=mine.content,
                    tau2_error=bool(other.get("error")),
                    arena_error=mine.error,
                )
            )
    sha = hashlib.sha256(gold.store.canonical_json().encode()).hexdigest()
    criteria = task.evaluation_criteria
    nl = criteria.nl_assertions or []
    judged = "NL_ASSERTION" in criteria.reward_basis
    score = score_task(
        task,
        end_state=gold.store,
        gold=gold.store,
        calls=gold.results,
        agent_texts=list(criteria.communicate_info or []),
        termination="agent_stop",
        nl_verdicts=[True] * len(nl),
    )
    return TaskParity(
        task=task.id,
        calls=len(gold.results),
        results_equal=not diffs and len(theirs) == len(gold.results),
        end_state_equal=sha == side.get("db_sha256"),
        gold_reward=score.reward,
        nl_unjudged=len(nl) if judged else 0,
        diffs=diffs[:5],
    )


def arena_timing(domain: Tau2Domain, tasks: list[Tau2Task]) -> dict[str, float]:
    """Median seconds of Arena's reset, call and end-state check (cached and uncached gold)."""
    template, tools = domain.template(), domain_tools(domain.name)
    golds = {t.id: replay_gold(domain, t).store for t in tasks}
    resets, calls, checks, uncached = [], [], [], []
    for task in tasks:
        start = time.perf_counter()
        state = template.copy()
        resets.append(time.perf_counter() - start)
        for action in task.evaluation_criteria.actions or []:
            start = time.perf_counter()
            call_tool(tools, state, action.name, dict(action.arguments))
            calls.append(time.perf_counter() - start)
        start = time.perf_counter()
        same_end_state(state, golds[task.id])
        checks.append(time.perf_counter() - start)
        start = time.perf_counter()
        same_end_state(state, replay_gold(domain, task).store)
        uncached.append(time.perf_counter() - start)
        state.close()
    return {
        "arena_reset_s": median(resets),
        "arena_call_s": median(calls) if calls else 0.0,
        "arena_verify_s": median(checks),
        "arena_verify_uncached_s": median(uncached),
    }


def run_parity(
    domain: Tau2Domain,
    checkout: Path,
    python: str,
    *,
    task_ids: list[str] | None = None,
    timing: bool = True,
    timeout_s: float = 3600.0,
) -> ParityReport:
    """Parity of every (or the named) task of an imported domain against τ²'s own environment."""
    by_id = {t.id: t for t in domain.tasks}
    unknown = [t for t in task_ids or [] if t not in by_id]
    if unknown:
        raise ValueError(f"no τ² {domain.name} tasks {unknown}")
    lines = side_lines(python, checkout, domain.name, task_ids, timing=timing, timeout_s=timeout_s)
    seen = {line["task"]: line for line in lines}
    wanted = [by_id[t] for t in task_ids] if task_ids else list(domain.tasks)
    missing = [t.id for t in wanted if t.id not in seen]
    if missing:
        raise SideError(
            f"the side interpreter reported no result for tasks {missing[:5]} (another checkout?)"
        )
    tasks = [compare_task(domain, t, seen[t.id]) for t in wanted]
    env_timing = None
    if timing:
        side_calls = [float(r["seconds"]) for t in wanted for r in seen[t.id]["results"]]
        env_timing = EnvTiming(
            tau2_reset_s=median(float(seen[t.id]["reset_s"]) for t in wanted),
            tau2_call_s=median(side_calls) if side_calls else 0.0,
            tau2_verify_s=median(float(seen[t.id]["verify_s"]) for t in wanted),
            **arena_timing(domain, wanted),
        )
    return ParityReport(domain=domain.name, commit=domain.manifest.commit, tasks=tasks, timing=env_timing)
