"""The rollout → trainer bridge: Arena episodes in, TRL's rollout dictionary out.

TRL's `GRPOTrainer` calls `rollout_func(prompts, trainer)` synchronously in its own thread, with
every prompt already repeated G times (one entry per completion). Each prompt is a one-message
conversation carrying the task key (`task_prompt`), so the bridge looks the task up, runs the G
episodes of every task concurrently on the event loop (`anyio.from_thread.run`), verifies them and
returns, per entry, the first token chain of the episode:

- `prompt_ids`: the first prompt (system prompt, tools and the task), exactly as rendered;
- `completion_ids`: everything after it — policy turns, tool results, template glue;
- `env_mask`: 1 on the policy's sampled tokens, 0 on tool results and glue (TRL multiplies it
  into the loss mask);
- `logprobs`: the sampling logprobs (0.0 where not sampled);
- `reward`: the verifier's reward, forwarded to `reward_from_rollout` (NaN, and a zeroed
  `env_mask`, for an episode that ended on an infrastructure error: `trainer.samples`).

A group whose rewards are all equal carries no GRPO signal. With `dynamic_sampling_passes` (DAPO's
dynamic sampling) the bridge first rolls out groups of tasks not yet drawn this step and puts each
one that has signal in the place of a flat group: TRL trains on the ids the bridge returns and
normalises advantages per block of G, so the substitute is trained exactly like a drawn group.
A group still flat after that, with `drop_zero_variance`, gets a zeroed `env_mask`, which removes
it from the loss *and* from the token normaliser (it is counted in
`RolloutStats.zero_variance_groups`). When the chat template re-rendered an earlier
turn differently (a `ChainBreak`), the turns after the break are not trained: only the first chain
is exactly what the model saw as one sequence.
"""

from __future__ import annotations

import math
import random
import statistics
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.from_thread
import structlog

from arena.episode.transcript import Transcript
from arena.protocols import ChatModel, UserSimulator
from arena.tasks.reward import Verdict
from trainer.config import TrainerConfig
from trainer.memory import release_memory
from trainer.metrics import RolloutStats
from trainer.samples import group_members, has_signal, infra_error, scored_reward, training_sample
from work.episode import Episode, EpisodeView, run_and_verify
from work.tasks import PreparedTask

log = structlog.get_logger(__name__)

TASK_TAG = "arena-task:"


def task_prompt(key: str) -> list[dict[str, str]]:
    """The dataset prompt for a task: a placeholder conversation that carries its key."""
    return [{"role": "user", "content": f"{TASK_TAG}{key}"}]


def prompt_key(prompt: Any) -> str:
    """The task key carried by a dataset prompt (a conversation or a plain string)."""
    text = prompt[-1]["content"] if isinstance(prompt, list) else str(prompt)
    if not isinstance(text, str) or not text.startswith(TASK_TAG):
        raise ValueError(f"rollout prompt does not carry an Arena task key: {str(text)[:80]!r}")
    return text[len(TASK_TAG) :]


def episode_view(config: TrainerConfig) -> EpisodeView:
    """What `config`'s episodes show the policy and how they are capped and rewarded."""
    return EpisodeView(
        episode=config.episode,
        reward=config.reward,
        system_prompt=config.system_prompt,
        tool_subset=config.tool_subset,
    )


# Runs one episode of the task with this key elsewhere, sampling as this policy does (its served model).
RemoteEpisodes = Callable[[str, ChatModel], Awaitable[Episode]]


@dataclass
class SampledBatch:
    """A step's episodes after dynamic sampling: one per slot, and what it cost beyond them."""

    keys: list[str]  # the task of each slot (a replaced group's slots name its substitute)
    episodes: list[Episode]
    extra: list[tuple[str, Transcript, Verdict]] = field(default_factory=list)  # run, not trained on
    resampled_groups: int = 0


class RolloutBridge:
    """The `rollout_func` for TRL: runs and verifies the episodes of each generation batch."""

    def __init__(
        self,
        tasks: Sequence[PreparedTask],
        config: TrainerConfig,
        *,
        policy_factory: Callable[[Any], ChatModel],
        user: UserSimulator | None = None,
        judge: ChatModel | None = None,
        sandbox: Any = None,
        simulator: ChatModel | None = None,
        on_rollout: Callable[[RolloutStats, list[tuple[str, Transcript, Verdict]]], None] | None = None,
        remote: RemoteEpisodes | None = None,
    ) -> None:
        self.tasks: Mapping[str, PreparedTask] = {t.key: t for t in tasks}
        self.simulator = simulator  # the helper that plays simulated environments
        self.config = config
        self.policy_factory = policy_factory
        self.user = user
        self.judge = judge
        self.sandbox = sandbox
        self.on_rollout = on_rollout
        # Where episodes run instead of here (cluster mode: Ray workers against the policy server).
        self.remote = remote
        self._policy: ChatModel | None = None
        self.history: list[RolloutStats] = []

    # TRL calls the instance: rollout_func(prompts, trainer)
    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, list[Any]]:
        keys = [prompt_key(p) for p in prompts]
        unknown = sorted({k for k in keys if k not in self.tasks})
        if unknown:
            raise KeyError(f"rollout asked for tasks that were not prepared: {unknown[:5]}")
        model = trainer.accelerator.unwrap_model(trainer.model)
        # Every batch: the factory returns its cached policy, refreshed to the current weights.
        self._policy = self.policy_factory(trainer)
        was_training = model.training
        model.eval()  # rollouts sample from the current weights without dropout or checkpointing
        started = time.perf_counter()
        step = int(getattr(trainer.state, "global_step", 0))
        try:
            batch = anyio.from_thread.run(self.sample, keys, step)
        finally:
            if was_training:
                model.train()
        seconds = time.perf_counter() - started
        # The batch's decode caches were freed into the heaps of the decoding threads: give them
        # back before the backward pass allocates its own (see `release_memory`).
        release_memory("grpo rollouts")
        pad_id = int(trainer.processing_class.pad_token_id or 0)
        return self.build_output(batch, pad_id=pad_id, seconds=seconds)

    async def sample(self, keys: list[str], step: int, policy: ChatModel | None = None) -> SampledBatch:
        """The step's episodes, its flat groups replaced where a fresh task's group has signal.

        Substitutes are drawn, without replacement, from the prepared tasks not in this step's
        batch (seeded by `config.seed` and the step: reruns draw alike); each pass rolls out one
        substitute per group still flat, all concurrently.
        """
        keys = list(keys)
        episodes = await self.rollout(keys, policy)
        batch = SampledBatch(keys=keys, episodes=episodes)
        rng = random.Random(f"{self.config.seed}:{step}")
        drawn = set(keys)
        for _ in range(self.config.dynamic_sampling_passes):
            flat = [
                members
                for members in group_members(batch.keys).values()
                if not has_signal([scored_reward(*batch.episodes[i]) for i in members])
            ]
            pool = sorted(k for k in self.tasks if k not in drawn)
            if not flat or not pool:
                break
            picks = rng.sample(pool, min(len(flat), len(pool)))
            drawn.update(picks)
            targets = list(zip(picks, flat[: len(picks)], strict=True))
            fresh = await self.rollout([key for key, members in targets for _ in members])
            start = 0
            for key, members in targets:
                group = fresh[start : start + len(members)]
                start += len(members)
                if has_signal([scored_reward(t, v) for t, v in group]):
                    batch.extra += [(batch.keys[i], *batch.episodes[i]) for i in members]
                    for i, episode in zip(members, group, strict=True):
                        batch.keys[i], batch.episodes[i] = key, episode
                    batch.resampled_groups += 1
                else:
                    batch.extra += [(key, *episode) for episode in group]
        if batch.resampled_groups or batch.extra:
            log.info(
                "grpo.dynamic_sampling",
                step=step,
                resampled_groups=batch.resampled_groups,
                discarded_episodes=len(batch.extra),
            )
        return batch

    async def rollout(self, keys: list[str], policy: ChatModel | None = None) -> list[Episode]:
        """Run and verify one episode per key, concurrently (up to `rollout_concurrency`), in order."""
        if policy is not None:
            self._policy = policy
        assert self._policy is not None, "no policy: pass one or call the bridge from TRL"
        view = episode_view(self.config)
        limiter = anyio.CapacityLimiter(self.config.rollout_concurrency)
        results: list[Episode | None] = [None] * len(keys)

        async def one(i: int, key: str) -> None:
            # One token chain per episode (`run_and_verify` opens its token session).
            async with limiter:
                if self.remote is not None:
                    results[i] = await self.remote(key, self._policy)
                    return
                results[i] = await run_and_verify(
                    self._policy,
                    self.tasks[key],
                    view,
                    user=self.user,
                    judge=self.judge,
                    sandbox=self.sandbox,
                    simulator=self.simulator,
                )

        async with anyio.create_task_group() as tg:
            for i, key in enumerate(keys):
                tg.start_soon(one, i, key)
        return [r for r in results if r is not None]

    def build_output(self, batch: SampledBatch, *, pad_id: int, seconds: float) -> dict[str, list[Any]]:
        """TRL's rollout dictionary from the batch's episodes (one per key, in order), flat groups masked.

        An episode that ended on an infrastructure error (`trainer.samples`) trains nothing and its
        reward is NaN: TRL leaves it out of its group's mean and spread. What dynamic sampling did
        goes into the stats; the episodes it discarded reach `on_rollout` too (the per-task
        outcomes count every episode run).
        """
        keys, results = batch.keys, batch.episodes
        prompt_ids, completion_ids, env_mask, logprobs, rewards = [], [], [], [], []
        for transcript, verdict in results:
            p, c, m, lp = training_sample(transcript, pad_id)
            prompt_ids.append(p)
            completion_ids.append(c)
            env_mask.append([0] * len(m) if infra_error(transcript) else m)
            logprobs.append(lp)
            rewards.append(scored_reward(transcript, verdict))
        groups = group_members(keys)
        zero = 0
        for members in groups.values():
            if not has_signal([rewards[i] for i in members]):
                zero += 1
                if self.config.drop_zero_variance:
                    for i in members:
                        env_mask[i] = [0] * len(env_mask[i])
        stats = rollout_stats(batch, groups=len(groups), zero_variance_groups=zero, seconds=seconds)
        self.history.append(stats)
        log.info(
            "grpo.rollout",
            episodes=stats.episodes,
            groups=stats.groups,
            zero_variance=zero,
            resampled=stats.resampled_groups,
            infra_errors=stats.infra_errors,
            reward_mean=round(stats.reward_mean, 3),
            pass_rate=round(stats.pass_rate, 3),
            seconds=round(seconds, 1),
            chain_breaks=stats.chain_breaks,
        )
        if self.on_rollout is not None:
            trained = [(k, t, v) for k, (t, v) in zip(keys, results, strict=True)]
            self.on_rollout(stats, [*trained, *batch.extra])
        return {
            "prompt_ids": prompt_ids,
            "completion_ids": completion_ids,
            "logprobs": logprobs,
            "env_mask": env_mask,
            "reward": rewards,
        }


def rollout_stats(
    batch: SampledBatch, *, groups: int, zero_variance_groups: int, seconds: float
) -> RolloutStats:
    """A batch's figures: rewards and pass rate over the scored episodes, infrastructure errors counted."""
    results = batch.episodes
    scored = [(t, v) for t, v in results if not infra_error(t)]
    rewards = [float(v.reward) for _, v in scored]
    policy_tokens = [sum(len(s.token_ids) for s in t.segments if s.kind == "policy") for t, _ in results]
    return RolloutStats(
        episodes=len(results),
        infra_errors=len(results) - len(scored),
        groups=groups,
        zero_variance_groups=zero_variance_groups,
        resampled_groups=batch.resampled_groups,
        discarded_episodes=len(batch.extra),
        reward_mean=statistics.fmean(rewards) if rewards else 0.0,
        reward_std=statistics.pstdev(rewards) if len(rewards) > 1 else 0.0,
        pass_rate=statistics.fmean(v.passed for _, v in scored) if scored else 0.0,
        mean_turns=statistics.fmean(t.num_turns for t, _ in results) if results else 0.0,
        mean_policy_tokens=statistics.fmean(policy_tokens) if policy_tokens else 0.0,
        generated_tokens=sum(policy_tokens),
        forced_tokens=sum(len(s.forced) for t, _ in results for s in t.segments if s.kind == "policy"),
        seconds=seconds,
        chain_breaks=sum(bool(t.chain_breaks) for t, _ in results),
        finishes=dict(Counter(t.finish for t, _ in results)),
    )


def reward_from_rollout(
    prompts: list[Any], completions: list[Any], reward: list[float], **_: Any
) -> list[float | None]:
    """TRL reward function: the verifier's reward computed during the rollout.

    None where the episode has no reward (NaN: an infrastructure error, `trainer.samples`): TRL
    leaves it out of its group's mean and spread and gives it advantage 0.
    """
    return [float(r) if r is not None and math.isfinite(r) else None for r in reward]
