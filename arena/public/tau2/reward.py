"""τ²'s reward of one run, by the parts of the task's `reward_basis`.

- DB: the run's end state equals the gold replay's (`same_end_state`). A task with neither gold
  actions nor env assertions passes without a comparison (τ²'s rule).
- ACTION: every gold action is matched by some call of the run (the agent's or the user's; failed
  calls count) with the same name and equal arguments. τ²'s comparison, kept for parity: with
  `compare_args` given, those arguments of both sides are compared; without, the arguments *the
  call* passed are, so a call that leaves out an argument the gold action has still matches, and
  one with no arguments at all matches any gold action of its name. `strict_actions=True` compares
  every argument of both sides instead.
- COMMUNICATE: each info string appears in some agent message, case-insensitive, after dropping the
  message's commas (not the info's: an info with a comma never matches, as in τ²). Saying a value
  counts even when the agent never looked it up.
- NL_ASSERTION: the verdicts of a judge the caller ran, one per assertion; without them the part
  fails and the score says the judge was missing.
- ENV_ASSERTION: Arena's ports have no assertion functions; a task that asks for any fails the part.

The reward is the product of the basis's parts (each 1 or 0); a run that did not end by the agent's
or the user's stop scores 0, as in τ². Parts outside the basis are still reported (None when not
computed), as τ² reports them.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from arena.public.tau2.docstore import DocStore, same_end_state
from arena.public.tau2.model import GoldAction, Tau2Task
from arena.public.tau2.replay import CallRecord

STOPS = ("agent_stop", "user_stop")  # the terminations τ² scores; any other scores 0


class Tau2Score(BaseModel):
    """A run's reward and the checks it is made of."""

    reward: float
    basis: list[str]
    db: bool | None = None
    actions: list[bool] | None = None
    communicate: list[bool] | None = None
    nl: list[bool] | None = None
    termination: str
    detail: list[str] = Field(default_factory=list, description="Why a part failed, in words.")


def action_matches(gold: GoldAction, call: CallRecord, *, strict: bool = False) -> bool:
    """Whether `call` does what the gold action does (τ²'s rule unless `strict`)."""
    if gold.name != call.name:
        return False
    if strict:
        keys: set[str] = set(gold.arguments) | set(call.arguments)
    elif gold.compare_args is None:
        keys = set(call.arguments)
    else:
        keys = set(gold.compare_args)
    if not keys:
        return True
    mine = {k: v for k, v in call.arguments.items() if k in keys}
    theirs = {k: v for k, v in gold.arguments.items() if k in keys}
    return mine == theirs


def communicated(info: str, agent_texts: list[str]) -> bool:
    """Whether an agent message says `info` (τ²'s substring test)."""
    needle = info.lower()
    return any(needle in text.lower().replace(",", "") for text in agent_texts if text and text.strip())


def score_task(
    task: Tau2Task,
    *,
    end_state: DocStore,
    gold: DocStore,
    calls: list[CallRecord],
    agent_texts: list[str],
    termination: str,
    nl_verdicts: list[bool] | None = None,
    strict_actions: bool = False,
) -> Tau2Score:
    """Score one run of `task` by τ²'s rules.

    `calls` and `agent_texts` are the whole trajectory's, the task's message history included
    (`replay.history_calls`, `replay.history_texts`), as τ² scores its full trajectory.
    `end_state` and `gold` are stores of the same template (`replay.initial_state`, `replay_gold`).
    """
    criteria = task.evaluation_criteria
    basis = list(criteria.reward_basis)
    if termination not in STOPS:
        return Tau2Score(
            reward=0.0,
            basis=basis,
            termination=termination,
            detail=[f"the run ended by {termination}, not by the agent or the user stopping"],
        )
    detail: list[str] = []
    parts: dict[str, bool] = {}

    db = same_end_state(end_state, gold) if criteria.db_reference else True
    parts["DB"] = db
    if not db:
        detail.append("DB: the end state differs from the gold actions' end state")

    actions = [any(action_matches(g, c, strict=strict_actions) for c in calls) for g in criteria.actions]
    parts["ACTION"] = all(actions)
    detail += [
        f"ACTION: no call matches gold action {g.action_id} ({g.name})"
        for g, ok in zip(criteria.actions, actions, strict=True)
        if not ok
    ]

    communicate = [communicated(info, agent_texts) for info in criteria.communicate_info]
    parts["COMMUNICATE"] = all(communicate)
    detail += [
        f"COMMUNICATE: the agent never said {info!r}"
        for info, ok in zip(criteria.communicate_info, communicate, strict=True)
        if not ok
    ]

    nl: list[bool] | None = None
    if not criteria.nl_assertions:
        nl, parts["NL_ASSERTION"] = [], True
    elif nl_verdicts is None:
        parts["NL_ASSERTION"] = False
        if "NL_ASSERTION" in basis:
            detail.append("NL_ASSERTION: no judge verdicts were given (the judge was missing)")
    else:
        if len(nl_verdicts) != len(criteria.nl_assertions):
            raise ValueError(f"{len(nl_verdicts)} verdicts for {len(criteria.nl_assertions)} NL assertions")
        nl = [bool(v) for v in nl_verdicts]
        parts["NL_ASSERTION"] = all(nl)
        detail += [
            f"NL_ASSERTION: judged unmet: {text!r}"
            for text, ok in zip(criteria.nl_assertions, nl, strict=True)
            if not ok
        ]

    parts["ENV_ASSERTION"] = not criteria.env_assertions
    if criteria.env_assertions and "ENV_ASSERTION" in basis:
        detail.append("ENV_ASSERTION: Arena's ports cannot run env assertions")

    reward = 1.0
    for part in basis:
        reward *= 1.0 if parts[part] else 0.0
    return Tau2Score(
        reward=reward,
        basis=basis,
        db=db,
        actions=actions,
        communicate=communicate,
        nl=nl,
        termination=termination,
        detail=[d for d in detail if d.split(":", 1)[0] in basis],
    )
