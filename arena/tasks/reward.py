"""The reward formula: from check results and episode counts to one number in [0, 1].

With `n` checks of which `k` passed, `m` malformed tool calls and `t` assistant turns::

    score   = k / n
    penalty = malformed_call_penalty * m
            + length_penalty_per_turn * max(0, t - free_turns)
            + (k - paid) / n          (unearned: see below)
    reward  = min(1, max(0, score - penalty))
    passed  = (k == n) and (paid == k) and reward >= pass_threshold

Rewards pay only for work done (DESIGN §4); `paid` is `k` unless one of these rules withholds
credit, and a withheld check shows in `penalties["unearned"]` and `Verdict.unearned`:

- **A task whose reference writes** pays nothing unless the episode made a successful write and
  every state and action check passed. An answer check, or a "nothing else changed" check that
  holds on the untouched state, says nothing about the work: it pays only once the work is
  verified. Partial credit then comes from the answer (the work done, the report missing).
- **A task that only reads** pays nothing unless its answer is right: every `answer` check (or,
  with none, every `rubric` check) passed. An answer value counts only if the agent observed it
  in this episode (`arena.tasks.provenance`).
- **A write must name only rows the episode showed.** An episode with a successful write whose
  arguments name a row (an id, a code, an email of a key column) that neither the user's words,
  nor an earlier tool result, nor the environment's rules showed the agent pays nothing
  (`arena.tasks.grounding`): a policy that learned the seed database's ids by heart would
  otherwise be paid for skipping the look-up that every other database needs.
- **Nothing else changed.** Every write task carries a `state_match` check (the loader adds one
  to a hand-written task that has none, `Task.with_state_guard`), so a write beside the task
  (a second reply into another thread) fails it; `ignore` names what may differ.

The rules are all-or-nothing on the work, as tau2-bench's database and action checks are: a
policy paid for part of a write learns to stop halfway, and one paid for "nothing else broke"
learns to do nothing.

Defaults: `malformed_call_penalty = 0.1`, `length_penalty_per_turn = 0.0` (length penalty off),
`free_turns = 0`, `pass_threshold = 1.0` — so with defaults an episode passes only when every check
passes and it made no malformed call. Partial credit comes from several checks per task (an SQL
checklist, say), once the work they depend on is verified; each check itself is pass/fail.
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
    # Rubric judging: attempts per rubric check before it fails (invalid JSON, model errors).
    judge_attempts: int = Field(default=3, ge=1, le=10)
    # Plain partial credit per check, without the work rules and provenance: only for synthetic
    # shaping tasks that test the training loop itself (the test suite's letters task), never for
    # tasks an agent is meant to learn from. Not exposed in the daemon's configuration.
    shaping_only: bool = False


PenaltyKind = Literal["malformed_calls", "length", "unearned"]
STATE_CHECKS: frozenset[str] = frozenset({"sql", "python", "state_match"})
# Checks that judge what the episode did to the environment (its state, or its write log).
WORK_CHECKS: frozenset[str] = STATE_CHECKS | {"action"}


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
    # Why credit was withheld (empty when every passed check paid); see the module docstring.
    unearned: str = ""
    # Write arguments naming rows the episode never showed, as `tool(argument='value')`.
    ungrounded: list[str] = Field(default_factory=list)

    @property
    def score(self) -> float:
        """The fraction of checks passed, before penalties."""
        return sum(c.passed for c in self.checks) / len(self.checks) if self.checks else 0.0

    def summary(self) -> str:
        """One line for logs and the CLI: `PASS reward=1.00 (3/3 checks)`."""
        k = sum(c.passed for c in self.checks)
        return f"{'PASS' if self.passed else 'FAIL'} reward={self.reward:.2f} ({k}/{len(self.checks)} checks)"


def _paid(
    results: list[CheckResult], *, writes_required: bool | None, wrote: bool | None, ungrounded: list[str]
) -> tuple[int, str]:
    """How many passed checks pay under the rules of the module docstring, and why the rest do not."""
    k = sum(r.passed for r in results)
    if ungrounded:
        return 0, "a write names a row the episode never showed the agent: " + ", ".join(ungrounded)
    if writes_required is True:
        if wrote is False:
            return 0, "the task needs a write and the episode made none"
        failed = [r.name for r in results if r.kind in WORK_CHECKS and not r.passed]
        if failed:
            return 0, "the work is not verified: " + ", ".join(failed)
    elif writes_required is False:
        answers = [r for r in results if r.kind == "answer"] or [r for r in results if r.kind == "rubric"]
        if not answers:
            return 0, "a task that only reads pays for its answer, and it has no answer check"
        wrong = [r.name for r in answers if not r.passed]
        if wrong:
            return 0, "a task that only reads pays only for a right answer: " + ", ".join(wrong)
    return k, ""


def compute_verdict(
    results: list[CheckResult],
    *,
    malformed_calls: int,
    turns: int,
    config: RewardConfig,
    writes_required: bool | None = None,
    wrote: bool | None = None,
    ungrounded: list[str] | None = None,
) -> Verdict:
    """Apply the reward formula to check results and the episode's malformed-call and turn counts.

    `writes_required` is whether the task's reference writes, `wrote` whether the episode made a
    successful write (None: unknown, as for simulated environments; the rules that need them
    then do not apply); `ungrounded` lists the write arguments that named rows the episode never
    showed (`arena.tasks.grounding.ungrounded_writes`).
    """
    n = len(results)
    k = sum(r.passed for r in results)
    score = k / n if n else 0.0
    penalties: dict[PenaltyKind, float] = {
        "malformed_calls": config.malformed_call_penalty * max(0, malformed_calls),
        "length": config.length_penalty_per_turn * max(0, turns - config.free_turns),
    }
    ungrounded = ungrounded or []
    paid, why = _paid(results, writes_required=writes_required, wrote=wrote, ungrounded=ungrounded)
    if paid < k:
        penalties["unearned"] = (k - paid) / n
    reward = min(1.0, max(0.0, score - sum(penalties.values())))
    # Round away float noise so that a perfect episode is exactly 1.0 (the gold gate compares).
    reward = round(reward, 9)
    # Withheld credit fails the episode whatever `pass_threshold` allows.
    passed = n > 0 and k == n and paid == k and reward >= config.pass_threshold
    return Verdict(
        reward=reward,
        passed=passed,
        checks=results,
        penalties=penalties,
        unearned=why,
        ungrounded=ungrounded,
    )
