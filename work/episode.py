"""One episode of a prepared task, run and verified: the same code in training and every evaluation.

`EpisodeView` is what an episode reads of the trainer's settings (its caps and sampling, the reward
rules, the prompt style and tool view); the trainer and the daemon build it from their
`TrainerConfig` (`trainer.rollout.episode_view`), so this layer never needs the trainer.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from arena.episode.runner import EpisodeConfig, run_episode
from arena.episode.transcript import Transcript
from arena.protocols import ChatModel, UserSimulator
from arena.tasks.reward import RewardConfig, Verdict
from arena.tasks.verify import verify
from simulate.token_chain import token_session
from work.tasks import PreparedTask

Episode = tuple[Transcript, Verdict]


class EpisodeView(BaseModel):
    """What every episode of a batch shows the policy, how it is capped and how it is rewarded.

    A value (it crosses to a Ray worker with its job): `episode` caps turns and tokens and holds the
    sampling parameters, `reward` the reward rules, `system_prompt` and `tool_subset` what
    `work.tasks.prepare_tasks` shows the policy.
    """

    model_config = ConfigDict(frozen=True)

    episode: EpisodeConfig
    reward: RewardConfig
    system_prompt: Literal["full", "compact"]
    tool_subset: int | None = Field(ge=0)


async def run_and_verify(
    policy: ChatModel,
    item: PreparedTask,
    view: EpisodeView,
    *,
    user: UserSimulator | None = None,
    judge: ChatModel | None = None,
    sandbox: Any = None,
    simulator: ChatModel | None = None,
) -> Episode:
    """One episode of a prepared task on a fresh instance, and its verdict.

    `user` plays the user of a conversational task; `judge` grades rubric checks (without one they
    fail, saying so). A task of a simulated environment runs on `simulator` (the helper model),
    which plays its tools, its user and its judge (`simulate.simenv`); its tool results reach the
    token chain as environment text, so they are never trained on.

    The episode is one token session (`simulate.token_chain`): a policy that renders its own
    prompts extends one chain turn after turn, in training and in every evaluation alike.
    """
    with token_session():
        return await _episode(
            policy, item, view, user=user, judge=judge, sandbox=sandbox, simulator=simulator
        )


async def _episode(
    policy: ChatModel,
    item: PreparedTask,
    view: EpisodeView,
    *,
    user: UserSimulator | None,
    judge: ChatModel | None,
    sandbox: Any,
    simulator: ChatModel | None,
) -> Episode:
    if item.env.kind == "simulated":
        from simulate.simenv import run_simulated_episode

        if simulator is None:
            raise ValueError(f"task {item.key} is simulated: it needs the helper model as simulator")
        episode = await run_simulated_episode(
            policy,
            item.env,
            item.task,
            helper=simulator,
            config=view.episode,
            system_prompt=item.system_prompt,
        )
        return episode.transcript, episode.verdict
    instance = item.env.new_instance(sandbox=sandbox) if item.env.sandboxed else item.env.new_instance()
    try:
        transcript = await run_episode(
            policy, instance, item.task, user=user, config=view.episode, system_prompt=item.system_prompt
        )
        verdict = await verify(
            item.task,
            instance,
            transcript,
            config=view.reward,
            expected_state=item.expected_state,
            env=item.env,
            sandbox=sandbox,
            judge=judge,
        )
    finally:
        await instance.aclose()
    return transcript, verdict
