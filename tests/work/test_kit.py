"""The episode kit: the helper's roles loaded only for the tasks that need them."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from arena.protocols import UserContext
from arena.tasks.model import RubricCheck, StateMatchCheck, Task
from simulate.simulators.judge import TrajectoryJudge
from simulate.simulators.user import SimulatedUser
from work.kit import episode_helpers, episode_kit

pytestmark = pytest.mark.anyio


class CountingModels:
    """A model source whose helper is a marker object; counts the helper's loads."""

    def __init__(self) -> None:
        self.helper_model = SimpleNamespace(name="scripted-helper")
        self.loads: list[str] = []

    async def policy(self) -> object:
        self.loads.append("policy")
        return SimpleNamespace(name="scripted-policy")

    async def helper(self) -> object:
        self.loads.append("helper")
        return self.helper_model


PLAIN = Task(id="plain", env="banking", instruction="Move $5 to savings.", checks=[StateMatchCheck()])
TALK = PLAIN.model_copy(
    update={"id": "talk", "mode": "conversational", "user": UserContext(intent="Move $5 to savings.")}
)
GRADED = PLAIN.model_copy(update={"id": "graded", "checks": [RubricCheck(criteria=["It is polite."])]})


async def test_episode_helpers_load_the_helper_only_for_tasks_that_need_it() -> None:
    models = CountingModels()
    helper = models.helper_model
    assert await episode_helpers(models, [PLAIN]) == (None, None) and models.loads == []
    user, judge = await episode_helpers(models, [PLAIN, TALK])
    assert isinstance(user, SimulatedUser) and user.model is helper and judge is None
    user, judge = await episode_helpers(models, [GRADED])
    assert user is None and isinstance(judge, TrajectoryJudge) and judge.model is helper


async def test_the_kit_plays_simulated_environments_on_the_helper_and_judges_only_executable_tasks() -> None:
    models = CountingModels()
    envs = {"banking": SimpleNamespace(kind="executable"), "weather": SimpleNamespace(kind="simulated")}
    plain = await episode_kit(models, envs, [PLAIN], sandbox="pool")
    assert (plain.user, plain.judge, plain.simulator, plain.sandbox) == (None, None, None, "pool")
    assert models.loads == []  # nothing the tasks do not need
    simulated = GRADED.model_copy(update={"env": "weather"})
    kit = await episode_kit(models, envs, [PLAIN, simulated])
    # The simulated task's rubric is the simulator's to grade: no judge for the executable ones.
    assert kit.simulator is models.helper_model and kit.judge is None and kit.user is None
    both = await episode_kit(models, envs, [GRADED, simulated])
    assert isinstance(both.judge, TrajectoryJudge) and both.simulator is models.helper_model
