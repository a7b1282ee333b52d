"""Simulated environments (TRUSTEE): the helper model plays the tools, the user and the judge.

A simulated environment is a loaded `arena.env.runtime.Environment` of kind `simulated`
(env.toml + tools.json). `SimulatedInstance` implements the `EnvInstance` protocol, so episodes
run through the ordinary `arena.episode.run_episode`: each tool call goes to the `ToolSimulator`
with the task's intent and the episode's `ToolMemory`. Faults of the call (unknown tool, invalid
arguments) and the tool's own refusals are ordinary `ToolResult`s; a simulator that cannot answer
(`SimulatorError`) is an environment failure, so `call` raises it and the runner ends the episode
as `env_error` with the simulator's reason in `finish_detail`.

Reward of a simulated episode (`verify_simulated`)::

    J = fraction of judge criteria met          (task rubric criteria, else criteria from the intent)
    T = mean over executed calls of (tool_reward + 1) / 2     (0 when no call was made)
    reward = clip(judge_weight * J + tool_weight * T - malformed_call_penalty * malformed, 0, 1)
    passed = every criterion met and reward >= pass_threshold

Defaults: judge_weight 0.8, tool_weight 0.2, malformed_call_penalty 0.1, pass_threshold 0.8.
An episode that ended in `env_error` (a simulator or the environment failed) is not judged: its
reward is 0 and its verdict says why. A judge that gives no valid verdict fails every criterion
with that reason.

The helper's model name, seed and sampling settings, the tool rewards and any simulator failure
are stored on `Transcript.metadata["simulator"]` by `run_simulated_episode`.
"""

from __future__ import annotations

import time
from typing import Any

import structlog
from pydantic import BaseModel, ConfigDict, Field

from arena.env.instance import ToolResult
from arena.env.runtime import Environment
from arena.episode.prompts import system_prompt_for
from arena.episode.runner import EpisodeConfig, run_episode
from arena.episode.transcript import Transcript
from arena.protocols import ChatModel
from arena.tasks.model import RubricCheck, Task
from arena.tasks.reward import CheckResult, Verdict
from arena.types import ToolSpec
from simulate.simulators.common import SimulatorError, SimulatorSettings
from simulate.simulators.judge import TrajectoryJudge, default_criteria
from simulate.simulators.taskgen import task_tool_subset
from simulate.simulators.tool import ToolMemory, ToolSimulator
from simulate.simulators.user import SimulatedUser

log = structlog.get_logger(__name__)


class SimRewardConfig(BaseModel):
    """Weights of the simulated-episode reward (formula in the module docstring)."""

    model_config = ConfigDict(extra="forbid")

    judge_weight: float = Field(default=0.8, ge=0.0, le=1.0)
    tool_weight: float = Field(default=0.2, ge=0.0, le=1.0)
    malformed_call_penalty: float = Field(default=0.1, ge=0.0, le=1.0)
    pass_threshold: float = Field(default=0.8, ge=0.0, le=1.0)


class SimulationSettings(BaseModel):
    """Sampling of each simulator; stored with every simulated episode."""

    model_config = ConfigDict(extra="forbid")

    tool: SimulatorSettings = Field(default_factory=lambda: SimulatorSettings(max_tokens=192))
    user: SimulatorSettings = Field(default_factory=lambda: SimulatorSettings(max_tokens=96))
    judge: SimulatorSettings = Field(default_factory=lambda: SimulatorSettings(max_tokens=200))
    max_user_turns: int = Field(default=6, ge=1)
    reward: SimRewardConfig = Field(default_factory=SimRewardConfig)


class SimulatedInstance:
    """One episode of a simulated environment: the `EnvInstance` the runner talks to."""

    def __init__(
        self,
        env: Environment,
        simulator: ToolSimulator,
        *,
        intent: str,
        tools: list[str] | None = None,
    ) -> None:
        if env.kind != "simulated":
            raise TypeError(f"environment {env.name!r} is {env.kind}, not simulated")
        wanted = set(tools) if tools else None
        self.env = env
        self.simulator = simulator
        self.intent = intent
        self.tool_specs: list[ToolSpec] = [s for s in env.tool_specs if wanted is None or s.name in wanted]
        self._specs = {s.name: s for s in self.tool_specs}
        self._writes = set(env.write_tools)
        self.memory = ToolMemory()
        self.failures: list[str] = []
        self.simulator_calls = 0

    async def call(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        """Simulate one call. Raises `SimulatorError` only when the helper model cannot answer."""
        started = time.perf_counter()
        spec = self._specs.get(name)
        if spec is None:
            return ToolResult(tool=name, ok=False, error=f"unknown tool {name!r}", error_kind="unknown_tool")
        writes = name in self._writes
        try:
            outcome = await self.simulator.simulate(
                spec, arguments, intent=self.intent, memory=self.memory, writes=writes, now=self.env.now
            )
        except SimulatorError as exc:
            self.failures.append(str(exc))
            log.warning("simenv.simulator_failed", env=self.env.name, tool=name, error=str(exc))
            raise
        if outcome.simulated and not outcome.cached:
            self.simulator_calls += 1
        return ToolResult(
            tool=name,
            ok=outcome.ok,
            output=outcome.output,
            error=outcome.error,
            writes=writes and outcome.ok,
            duration_us=(time.perf_counter() - started) * 1e6,
            error_kind=outcome.error_kind,
        )

    async def aclose(self) -> None:
        """Nothing to release: the simulated state lives in the memory."""

    @property
    def tool_rewards(self) -> list[int]:
        """The tool reward of every executed call, in order."""
        return self.memory.rewards


def task_criteria(task: Task) -> list[str]:
    """The task's rubric criteria, or default ones from its intent."""
    crits = [c for check in task.checks if isinstance(check, RubricCheck) for c in check.criteria]
    return crits or default_criteria(intent_of(task))


def intent_of(task: Task) -> str:
    """The hidden user intent, or the instruction for autonomous tasks without one."""
    return task.user.intent if task.user else task.instruction


def tool_score(rewards: list[int]) -> float:
    """T in the reward formula: mean (reward + 1) / 2, 0 without calls."""
    return sum((r + 1) / 2 for r in rewards) / len(rewards) if rewards else 0.0


async def verify_simulated(
    task: Task,
    instance: SimulatedInstance,
    transcript: Transcript,
    judge: TrajectoryJudge,
    config: SimRewardConfig | None = None,
) -> Verdict:
    """Judge the episode and combine it with the tool rewards. Never raises for a bad episode."""
    config = config or SimRewardConfig()
    if transcript.finish == "env_error":
        detail = f"episode ended in env_error: {transcript.finish_detail}"[:300]
        return Verdict(
            reward=0.0,
            passed=False,
            checks=[CheckResult(kind="rubric", name="episode", passed=False, detail=detail)],
        )
    criteria = task_criteria(task)
    try:
        score = await judge.score(intent_of(task), transcript, criteria)
        checks = [
            CheckResult(kind="rubric", name=s.criterion[:80], passed=s.passed, detail=s.reason[:200])
            for s in score.criteria
        ]
        j = score.overall
        all_met = score.passed
    except SimulatorError as exc:
        checks = [
            CheckResult(kind="rubric", name=c[:80], passed=False, detail=str(exc)[:300]) for c in criteria
        ]
        j, all_met = 0.0, False
    t = tool_score(instance.tool_rewards)
    penalty = config.malformed_call_penalty * transcript.malformed_calls
    reward = round(min(1.0, max(0.0, config.judge_weight * j + config.tool_weight * t - penalty)), 9)
    return Verdict(
        reward=reward,
        passed=all_met and reward >= config.pass_threshold,
        checks=checks,
        penalties={"malformed_calls": penalty, "length": 0.0},
    )


class SimulatedEpisode(BaseModel):
    """A finished simulated episode: its transcript (with simulator metadata) and verdict."""

    transcript: Transcript
    verdict: Verdict


def simulator_metadata(
    helper: ChatModel, settings: SimulationSettings, instance: SimulatedInstance, user: SimulatedUser | None
) -> dict[str, Any]:
    """What `Transcript.metadata["simulator"]` records: model, seeds, sampling, rewards, failures."""
    return {
        "model": getattr(helper, "name", ""),
        "backend": getattr(helper, "backend", type(helper).__name__),
        "settings": settings.model_dump(mode="json"),
        "tool_rewards": instance.tool_rewards,
        "tool_simulator_calls": instance.simulator_calls,
        "cached_calls": sum(o.cached for o in instance.memory.history),
        "user_simulator_calls": user.calls if user else 0,
        "failures": list(instance.failures),
    }


async def run_simulated_episode(
    policy: ChatModel,
    env: Environment,
    task: Task,
    *,
    helper: ChatModel,
    settings: SimulationSettings | None = None,
    config: EpisodeConfig | None = None,
    system_prompt: str | None = None,
) -> SimulatedEpisode:
    """Run `task` on simulated `env` with `policy`; the helper plays tools, user and judge.

    The agent sees the task's tool subset when the task generator recorded one, under
    `system_prompt` (default: the environment's full prompt; training passes its own style). Never
    raises for anything the policy or the simulators do (failures end up in the transcript and
    verdict).
    """
    settings = settings or SimulationSettings()
    instance = SimulatedInstance(
        env, ToolSimulator(helper, settings.tool), intent=intent_of(task), tools=task_tool_subset(task)
    )
    user = (
        SimulatedUser(helper, settings.user, max_user_turns=settings.max_user_turns)
        if task.mode == "conversational"
        else None
    )
    try:
        transcript = await run_episode(
            policy,
            instance,
            task,
            user=user,
            config=config,
            system_prompt=system_prompt or system_prompt_for(env, task.mode),
        )
    finally:
        await instance.aclose()
    if transcript.finish == "env_error" and not instance.failures:
        # The user simulator's failure reached the runner only as a detail; keep it with the others.
        instance.failures.append(transcript.finish_detail)
    judge = TrajectoryJudge(helper, settings.judge)
    verdict = await verify_simulated(task, instance, transcript, judge, settings.reward)
    transcript.metadata["simulator"] = simulator_metadata(helper, settings, instance, user)
    log.info(
        "simenv.episode",
        env=env.name,
        task=task.id,
        finish=transcript.finish,
        reward=verdict.reward,
        passed=verdict.passed,
        tool_calls=len(transcript.calls),
    )
    return SimulatedEpisode(transcript=transcript, verdict=verdict)
