"""What an episode gives GRPO: its token sample, its reward, and whether it counts at all.

`training_sample` lays out an episode's first token chain the way TRL's `rollout_func` hands it
over (prompt ids, completion ids, a mask that is 1 on the tokens the loss trains, the sampler's
log-prob of each token). `scored_reward` is what the episode contributes to its group's
statistics: the verifier's reward, or nothing (NaN) for an episode that ended on an
infrastructure error — the environment, the user simulator or the policy's server failed, not
the policy. Scoring such an episode 0 would lower its group's mean and widen its spread, handing
every other member of the group an advantage nobody earned; TRL leaves a reward of None (NaN) out
of the group's mean and spread and gives its completion advantage 0, which is what these get.
"""

from __future__ import annotations

import logging
import math
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from arena.episode.transcript import Transcript
from arena.tasks.reward import Verdict

# Finishes that say the episode's infrastructure failed, not the policy (`arena.episode.transcript`).
INFRA_FINISHES = frozenset({"env_error", "model_error"})


def infra_error(transcript: Transcript) -> bool:
    """Whether the episode ended because its environment, user simulator or model server failed."""
    return transcript.finish in INFRA_FINISHES


def scored_reward(transcript: Transcript, verdict: Verdict) -> float:
    """The reward the episode's group is normalised with: NaN (left out) after an infrastructure error."""
    return math.nan if infra_error(transcript) else float(verdict.reward)


def has_signal(rewards: Sequence[float]) -> bool:
    """Whether a group's scored rewards differ (GRPO's advantages are all zero otherwise); NaN
    rewards (infrastructure errors) are left out."""
    scored = [r for r in rewards if not math.isnan(r)]
    return bool(scored) and max(scored) - min(scored) >= 1e-9


def group_members(keys: Sequence[str]) -> dict[str, list[int]]:
    """The slots of each task's group, in order."""
    groups: dict[str, list[int]] = defaultdict(list)
    for i, key in enumerate(keys):
        groups[key].append(i)
    return groups


def training_sample(
    transcript: Transcript, pad_id: int
) -> tuple[list[int], list[int], list[int], list[float]]:
    """(prompt_ids, completion_ids, env_mask, logprobs) of an episode's first token chain.

    An episode without tokens (the policy failed before its first turn) yields a one-token
    placeholder whose mask is 0, so it still fills its slot but trains nothing.
    """
    if not transcript.chains or len(transcript.chains[0].segments) < 2:
        return [pad_id], [pad_id], [0], [0.0]
    chain = transcript.chains[0]
    return chain.prompt_ids(), chain.completion_ids(), chain.mask(), sampler_logprobs(chain)


def sampler_logprobs(chain: Any) -> list[float]:
    """The sampler's log-prob of each completion token: NaN on a policy turn that returned none.

    NaN, not 0.0: a log-prob of 0 would claim the sampler was certain, and the importance ratio
    against it would shrink that token's update; TRL's correction gives NaN tokens ratio 1.
    Tokens that are not the policy's get 0.0 (the loss masks them).
    """
    out: list[float] = []
    for s in chain.segments[1:]:
        if s.kind != "policy":
            out.extend([0.0] * len(s.token_ids))
        elif s.logprobs is not None and len(s.logprobs) == len(s.token_ids):
            out.extend(float(v) for v in s.logprobs)
        else:
            out.extend([math.nan] * len(s.token_ids))
    return out


class _UnscoredNotice(logging.Filter):
    """Drops TRL's warning about a completion no reward function scored: here that is an
    infrastructure error by design, counted in `RolloutStats.infra_errors`, and the warning would
    print the whole episode's prompt and completion into the log."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("All reward functions returned None")


def quiet_unscored_notice() -> None:
    """Install `_UnscoredNotice` on TRL's GRPO logger (once)."""
    trl_logger = logging.getLogger("trl.trainer.grpo_trainer")
    if not any(isinstance(f, _UnscoredNotice) for f in trl_logger.filters):
        trl_logger.addFilter(_UnscoredNotice())
