"""The reward formula: from check results and episode counts to one number in [0, 1].

With `n` checks of which `k` passed, `m` malformed tool calls and `t` assistant turns::

    score   = k / n
    penalty = malformed_call_penalty * m
            + length_penalty_per_turn * max(0, t - free_turns)
            + u / n   (no_change: see below)
    reward  = min(1, max(0, score - penalty))
    passed  = (k == n) and reward >= pass_threshold

`u` is the number of passed state checks (sql, python, state_match) of an episode that left the
state untouched while a state check failed, i.e. the task needed a change that never happened.
Those checks ("no other hold changed") hold on the untouched state: they say nothing broke, not
that any work was done, and an agent that does nothing must not earn reward for them. Once the
episode changed the state they count as usual. `credit_untouched_state = True` turns this off.

Defaults: `malformed_call_penalty = 0.1`, `length_penalty_per_turn = 0.0` (length penalty off),
`free_turns = 0`, `pass_threshold = 1.0` — so with defaults an episode passes only when every check
passes and it made no malformed call. Partial credit comes from several checks per task (an SQL
checklist, say); each check itself is pass/fail.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from arena.tasks.model import CheckKind


class RewardConfig(BaseModel):
    """How check results and episode counts become a reward (formula in the module docstring)."""

    model_config = ConfigDict(extra="forbid")

    malformed_call_penalty: float = Field(default=0.1, ge=0.0, le=1.0)
    length_penalty_per_turn: float = Field(default=0.0, ge=0.0, le=1.0)
    free_turns: int = Field(default=0, ge=0)
    pass_threshold: float = Field(default=1.0, ge=0.0, le=1.0)
    credit_untouched_state: bool = False  # True: a do-nothing episode earns its preservation checks
    # Rubric judging: attempts per rubric check before it fails (invalid JSON, model errors).
    judge_attempts: int = Field(default=3, ge=1, le=10)


PenaltyKind = Literal["malformed_calls", "length", "no_change"]
STATE_CHECKS: frozenset[str] = frozenset({"sql", "python", "state_match"})


class CheckResult(BaseModel):
    """The outcome of one check; `detail` says why it failed (or what passed) in one line."""

    kind: CheckKind
    name: str
    passed: bool
    detail: str = ""


class Verdict(BaseModel):
    """The verification of one episode: reward, pass/fail, per-check results and the penalties taken."""

    reward: float = Field(ge=0.0, le=1.0)
    passed: bool
    checks: list[CheckResult]
    penalties: dict[PenaltyKind, float] = Field(default_factory=dict)

    @property
    def score(self) -> float:
        """The fraction of checks passed, before penalties."""
        return sum(c.passed for c in self.checks) / len(self.checks) if self.checks else 0.0

    def summary(self) -> str:
        """One line for logs and the CLI: `PASS reward=1.00 (3/3 checks)`."""
        k = sum(c.passed for c in self.checks)
        return f"{'PASS' if self.passed else 'FAIL'} reward={self.reward:.2f} ({k}/{len(self.checks)} checks)"


def needs_change_evidence(results: list[CheckResult]) -> bool:
    """Whether the no-change rule could apply: some state check failed and another passed."""
    state = [r for r in results if r.kind in STATE_CHECKS]
    return any(not r.passed for r in state) and any(r.passed for r in state)


def compute_verdict(
    results: list[CheckResult],
    *,
    malformed_calls: int,
    turns: int,
    config: RewardConfig,
    state_changed: bool | None = None,
) -> Verdict:
    """Apply the reward formula to check results and the episode's malformed-call and turn counts.

    `state_changed` is whether the episode changed the environment's state (None: unknown, as for
    simulated environments; the no-change rule then does not apply).
    """
    n = len(results)
    k = sum(r.passed for r in results)
    score = k / n if n else 0.0
    penalties: dict[PenaltyKind, float] = {
        "malformed_calls": config.malformed_call_penalty * max(0, malformed_calls),
        "length": config.length_penalty_per_turn * max(0, turns - config.free_turns),
    }
    if state_changed is False and not config.credit_untouched_state and needs_change_evidence(results):
        penalties["no_change"] = sum(r.passed for r in results if r.kind in STATE_CHECKS) / n
    reward = min(1.0, max(0.0, score - sum(penalties.values())))
    # Round away float noise so that a perfect episode is exactly 1.0 (the gold gate compares).
    reward = round(reward, 9)
    passed = n > 0 and k == n and reward >= config.pass_threshold
    return Verdict(reward=reward, passed=passed, checks=results, penalties=penalties)
