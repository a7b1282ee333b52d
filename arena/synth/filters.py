"""The gates every synthesized task passes, in order of cost, with rejections counted per gate.

1. duplicate: the same environment and the same reference calls as a task kept before;
2. stability: the reference replays twice to the same state and the same outputs;
3. gold: replaying the reference scores 1.0 (DESIGN §4), against the stable replay's state;
4. adversary: every non-working agent (`arena.tasks.adversary`: the empty episode, the answer
   without a call, the reads without the writes, ...) earns 0 (DESIGN §4); what each agent
   earned is counted in the report's `adversaries`;
5. solvability (optional, off by default on CPU): a reference agent solves it in at least
   `solvability_min_passes` of `solvability_runs` episodes (Agent-World keeps 2 of 5).
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

import structlog
from pydantic import BaseModel, ConfigDict

from arena.env.state import from_image, states_equal
from arena.protocols import ChatModel, UserSimulator
from arena.synth.cost import StageMeter, SynthesisReport
from arena.tasks.gates import adversary_gate, gold_gate
from arena.tasks.model import Task
from arena.tasks.replay import ReferenceReplayError, first_failure, replay_reference
from arena.tasks.reward import RewardConfig

log = structlog.get_logger(__name__)

GATES = ("duplicate", "stability", "gold", "adversary", "solvability")


class GateConfig(BaseModel):
    """Which optional gates run, and how strict they are."""

    model_config = ConfigDict(extra="forbid")

    stability: bool = True
    dedup: bool = True
    solvability_runs: int = 0  # 0 = off (the default on CPU); Agent-World uses 5
    solvability_min_passes: int = 2
    reward: RewardConfig | None = None


def reference_key(task: Task) -> str:
    """What makes two tasks duplicates: the environment and the exact reference calls."""
    calls = [[c.name, c.arguments] for c in task.reference]
    return json.dumps([task.env, calls], sort_keys=True, ensure_ascii=False, default=str)


class TaskFilter:
    """Runs the gates for one environment; remembers kept tasks for de-duplication."""

    def __init__(
        self,
        env: Any,
        config: GateConfig | None = None,
        *,
        judge: ChatModel | None = None,
        sandbox: Any = None,
        report: SynthesisReport | None = None,
        agent: ChatModel | None = None,
        user: UserSimulator | None = None,
    ) -> None:
        self.env = env
        self.config = config or GateConfig()
        self.judge = judge
        self.sandbox = sandbox
        self.report = report
        self.agent = agent
        self.user = user
        self.seen: set[str] = set()

    def _reject(self, gate: str, task: Task, detail: str) -> str:
        if self.report is not None:
            self.report.reject(gate)
        log.debug("synth_task_rejected", env=self.env.name, task=task.id, gate=gate, detail=detail[:300])
        return gate

    async def _replay_state(
        self, task: Task, *, keep: bool
    ) -> tuple[sqlite3.Connection | None, bytes, list[Any]]:
        """(the final state if `keep`, its image, the reference's tool results)."""
        instance, results = await replay_reference(self.env, task, sandbox=self.sandbox)
        try:
            problem = first_failure(results)
            if problem is not None:
                raise ReferenceReplayError(problem)
            return (instance.snapshot() if keep else None), instance.image(), list(results)
        finally:
            await instance.aclose()

    async def admit(self, task: Task, meter: StageMeter) -> bool:
        """`check`, timed and counted as the "gates" stage; True when the task is kept."""
        with meter.timed("gates") as cost:
            cost.attempted += 1
            if await self.check(task) is not None:
                return False
            cost.accepted += 1
            return True

    async def check(self, task: Task) -> str | None:
        """None when the task passes every gate, else the name of the gate that rejected it."""
        key = reference_key(task)
        if self.config.dedup and key in self.seen:
            return self._reject("duplicate", task, "same reference calls as a kept task")
        executable = getattr(self.env, "kind", "executable") == "executable"
        expected: sqlite3.Connection | None = None
        second: sqlite3.Connection | None = None
        results: list[Any] | None = None
        try:
            if executable:
                try:
                    expected, image, results = await self._replay_state(task, keep=True)
                    if self.config.stability:
                        _, image2, results2 = await self._replay_state(task, keep=False)
                        # Identical bytes settle it cheaply; otherwise compare the rows.
                        if image2 != image:
                            second = from_image(image2)
                        outputs, outputs2 = ([(r.ok, r.output) for r in rs] for rs in (results, results2))
                        if outputs != outputs2 or (second is not None and not states_equal(expected, second)):
                            return self._reject("stability", task, "two replays differ")
                except ReferenceReplayError as exc:
                    return self._reject("gold", task, str(exc))
            kwargs: dict[str, Any] = {
                "judge": self.judge,
                "sandbox": self.sandbox,
                "config": self.config.reward,
                "expected_state": expected,
            }
            gold = await gold_gate(self.env, task, **kwargs)
            if not gold.ok:
                return self._reject("gold", task, gold.detail)
            adversary = await adversary_gate(self.env, task, **kwargs, reference_results=results)
            if self.report is not None:
                self.report.count_adversaries(adversary.agents)
            if not adversary.ok:
                return self._reject("adversary", task, adversary.detail)
            if self.config.solvability_runs > 0 and self.agent is not None:
                passes = await self._solvability(task, expected)
                if passes < self.config.solvability_min_passes:
                    return self._reject(
                        "solvability",
                        task,
                        f"{passes}/{self.config.solvability_runs} reference-agent runs passed",
                    )
        finally:
            for conn in (expected, second):
                if conn is not None:
                    conn.close()
        if self.config.dedup:
            self.seen.add(key)
        return None

    async def _solvability(self, task: Task, expected: sqlite3.Connection | None) -> int:
        """How many reference-agent episodes pass (stops early once the bar is met or out of reach)."""
        from arena.episode.runner import run_episode
        from arena.tasks.replay import new_instance
        from arena.tasks.verify import verify

        assert self.agent is not None
        if task.mode == "conversational" and self.user is None:
            return 0
        passes = 0
        runs = self.config.solvability_runs
        for i in range(runs):
            instance = new_instance(self.env, self.sandbox)
            try:
                transcript = await run_episode(self.agent, instance, task, user=self.user)
                verdict = await verify(
                    task,
                    instance,
                    transcript,
                    judge=self.judge,
                    sandbox=self.sandbox,
                    config=self.config.reward,
                    env=self.env,
                    expected_state=expected,
                )
            finally:
                await instance.aclose()
            passes += int(verdict.passed)
            if (
                passes >= self.config.solvability_min_passes
                or passes + (runs - i - 1) < self.config.solvability_min_passes
            ):
                break
        return passes
