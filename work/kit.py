"""One object holding what an episode needs besides its task, and the runner built from it.

The daemon builds an `EpisodeKit` from its `ModelHub`, its loaded environments and its sandbox
pool; a Ray worker builds one from its own. Both then run a phase's episodes through
`episode_runner`, so an episode is the same wherever it runs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

from arena.protocols import ChatModel, UserSimulator
from arena.tasks.model import Task
from work.episode import Episode, EpisodeView, run_and_verify
from work.jobs import EpisodeResult, Runner, WorkItem
from work.tasks import PreparedTask, prepare_tasks


class ModelSource(Protocol):
    """Where an episode's models come from (the daemon's or a worker's `ops.models.ModelHub`)."""

    async def policy(self) -> ChatModel:
        """The policy, as it is now (a new round's weights may have replaced it)."""
        ...

    async def helper(self) -> ChatModel:
        """The helper model: simulated users, judges, simulated environments."""
        ...


class EpisodeHelpers(NamedTuple):
    """What executable tasks' episodes may need besides the policy (None where no task needs it)."""

    user: UserSimulator | None  # for conversational tasks
    judge: ChatModel | None  # for rubric checks


async def episode_helpers(models: ModelSource, tasks: Iterable[Task]) -> EpisodeHelpers:
    """The simulated user and the rubric judge `tasks` need, both on the helper model.

    Once the curriculum raises the `conversational` knob, synthesized tasks reveal their intent
    only through a simulated user, and a task written by the helper (or by hand) may carry rubric
    checks: without these, such episodes could not start and such checks could never pass.
    """
    from arena.tasks.model import RubricCheck

    tasks = list(tasks)
    conversational = any(t.mode == "conversational" for t in tasks)
    rubric = any(isinstance(c, RubricCheck) for t in tasks for c in t.checks)
    if not (conversational or rubric):
        return EpisodeHelpers(user=None, judge=None)
    helper = await models.helper()
    from simulate.simulators.judge import TrajectoryJudge
    from simulate.simulators.user import SimulatedUser

    # Both wrappers count their calls under their own role (user, judge) in the model metrics.
    return EpisodeHelpers(
        user=SimulatedUser(helper) if conversational else None,
        judge=TrajectoryJudge(helper) if rubric else None,
    )


@dataclass(frozen=True)
class EpisodeKit:
    """What the episodes of a batch of tasks need besides each task: the models, the environments,
    the sandbox pool, and the helper's roles (user, judge, simulator) where the tasks need them."""

    models: ModelSource
    envs: Mapping[str, Any]  # arena.env.runtime.Environment by name
    sandbox: Any = None  # arena.sandbox.SandboxPool, for sandboxed environments
    user: UserSimulator | None = None
    judge: ChatModel | None = None
    simulator: ChatModel | None = None  # the helper, playing simulated environments

    async def prepare(self, tasks: Sequence[Task], view: EpisodeView) -> tuple[list[PreparedTask], list[str]]:
        """`tasks` prepared as `view` shows them (`work.tasks.prepare_tasks`), with the skipped lines."""
        return await prepare_tasks(
            tasks,
            self.envs,
            sandbox=self.sandbox,
            system_prompt=view.system_prompt,
            tool_subset=view.tool_subset,
        )

    async def run(self, item: PreparedTask, view: EpisodeView, policy: ChatModel | None = None) -> Episode:
        """One episode of `item` and its verdict; on `policy`, else the models' policy as it is now."""
        return await run_and_verify(
            policy if policy is not None else await self.models.policy(),
            item,
            view,
            user=self.user,
            judge=self.judge,
            sandbox=self.sandbox,
            simulator=self.simulator,
        )


async def episode_kit(
    models: ModelSource, envs: Mapping[str, Any], tasks: Iterable[Task], sandbox: Any = None
) -> EpisodeKit:
    """The kit for `tasks`: the user and judge their executable tasks need, the helper as simulator
    when any is simulated (it plays those tasks' tools, user and judge); nothing loaded otherwise."""
    tasks = list(tasks)
    simulated = [getattr(envs.get(t.env), "kind", None) == "simulated" for t in tasks]
    helpers = await episode_helpers(models, [t for t, sim in zip(tasks, simulated, strict=True) if not sim])
    return EpisodeKit(
        models=models,
        envs=envs,
        sandbox=sandbox,
        user=helpers.user,
        judge=helpers.judge,
        simulator=await models.helper() if any(simulated) else None,
    )


def episode_result(transcript: Any, verdict: Any) -> EpisodeResult:
    """The `EpisodeResult` of a finished episode (its transcript and verdict as JSON documents)."""
    return EpisodeResult(
        reward=verdict.reward,
        passed=verdict.passed,
        finish=str(transcript.finish),
        transcript=transcript.model_dump(mode="json"),
        verdict=verdict.model_dump(mode="json"),
    )


async def episode_runner(
    kit: EpisodeKit, tasks: Sequence[Task], view: EpisodeView
) -> tuple[Runner, set[str], list[str]]:
    """A runner of `tasks`' episodes with `kit`, the task ids it can run, and a line per task that
    could not be prepared. Every episode goes through `run_and_verify`, as training's rollouts do."""
    prepared, skipped = await kit.prepare(tasks, view)
    by_key = {p.key: p for p in prepared}

    async def run(item: WorkItem) -> EpisodeResult:
        return episode_result(*await kit.run(by_key[item.task_id], view))

    return run, set(by_key), skipped
