"""τ²'s reward on the mini domain: the gold solution scores 1 under every basis, and the cheap ways
a policy could look good (not calling, reading without writing, writing the wrong row or one row
too many, ending early) score 0; what τ²'s rules let through (undoing a write, saying a value never
looked up, a call with no arguments for an ACTION check) is shown as it is."""

from __future__ import annotations

from typing import Any

import pytest

from arena.public.tau2.docstore import DocStore, call_tool
from arena.public.tau2.domains import PORTS, DomainPortError, domain_port, domain_tools
from arena.public.tau2.model import Tau2Task
from arena.public.tau2.replay import (
    CallRecord,
    Tau2ReplayError,
    history_calls,
    history_texts,
    initial_state,
    replay_gold,
)
from arena.public.tau2.reward import Tau2Score, action_matches, communicated, score_task

NEW = {
    "address1": "40 Bay Street",
    "address2": "",
    "city": "Portland",
    "state": "ME",
    "country": "USA",
    "zip": "04102",
}
ADA_HOME = {
    "address1": "12 Elm Street",
    "address2": "Apt 3",
    "city": "Springfield",
    "state": "IL",
    "country": "USA",
    "zip": "62701",
}


def _play(
    domain: Any, task: Tau2Task, calls: list[tuple[str, dict[str, Any]]]
) -> tuple[DocStore, list[CallRecord]]:
    """An agent that makes `calls` on the task's initial state."""
    store = initial_state(domain, task)
    tools = domain_tools(domain.name)
    records = []
    for name, arguments in calls:
        outcome = call_tool(tools, store, name, arguments)
        records.append(
            CallRecord(name=name, arguments=arguments, content=outcome.content, error=outcome.error)
        )
    return store, records


def _score(
    domain: Any,
    task_id: str,
    calls: list[tuple[str, dict[str, Any]]],
    texts: list[str] = (),  # type: ignore[assignment]
    *,
    termination: str = "agent_stop",
    nl: list[bool] | None = None,
    strict: bool = False,
) -> Tau2Score:
    task = domain.task(task_id)
    store, records = _play(domain, task, calls)
    gold = replay_gold(domain, task)
    assert not any(r.error for r in gold.results), gold.results
    return score_task(
        task,
        end_state=store,
        gold=gold.store,
        calls=history_calls(task) + records,
        agent_texts=history_texts(task) + list(texts),
        termination=termination,
        nl_verdicts=nl,
        strict_actions=strict,
    )


def _gold_calls(task: Tau2Task) -> list[tuple[str, dict[str, Any]]]:
    return [(a.name, a.arguments) for a in task.evaluation_criteria.actions]


def test_the_gold_solution_scores_one_under_every_basis(mini_domain: Any) -> None:
    for task in mini_domain.tasks:
        criteria = task.evaluation_criteria
        texts = [f"Noted: {info}." for info in criteria.communicate_info]
        nl = [True] * len(criteria.nl_assertions) if criteria.nl_assertions else None
        score = _score(mini_domain, task.id, _gold_calls(task), texts, nl=nl)
        assert score.reward == 1.0 and score.detail == [], (task.id, score)
        assert score.basis == criteria.reward_basis and score.db is True


def test_db_cheap_agents_score_zero(mini_domain: Any) -> None:
    ada = ("find_user_id_by_email", {"email": "ada.park@example.com"})
    look = ("get_order_details", {"order_id": "#W1000001"})
    cancel = ("cancel_pending_order", {"order_id": "#W1000001", "reason": "no longer needed"})
    cheap = {
        "answers without calling": [],
        "reads everything, never writes": [ada, look],
        "writes the wrong row": [
            ada,
            ("cancel_pending_order", {"order_id": "#W1000003", "reason": "no longer needed"}),
        ],
        "writes the right row wrongly": [
            ada,
            ("cancel_pending_order", {**cancel[1], "reason": "ordered by mistake"}),
        ],
        "writes one row too many": [
            ada,
            look,
            cancel,
            ("modify_user_address", {"user_id": "ada_park_1001", **NEW}),
        ],
    }
    for what, calls in cheap.items():
        score = _score(mini_domain, "0", calls, ["Your order is cancelled."])
        assert score.reward == 0.0 and score.db is False, what
        assert score.detail == ["DB: the end state differs from the gold actions' end state"], what
    # The same end state by another path passes: τ² checks the state, not the steps.
    assert _score(mini_domain, "0", [cancel]).reward == 1.0
    # A refused write leaves nothing behind (the port's savepoint), so retrying after it passes.
    refused = ("cancel_pending_order", {"order_id": "#W1000001", "reason": "bored"})
    score = _score(mini_domain, "0", [refused, cancel])
    assert score.reward == 1.0


def test_undoing_its_own_write_leaves_the_state_gold_expects(mini_domain: Any) -> None:
    # Task 2's gold writes nothing; an agent that changes an address and puts it back ends equal.
    calls = [
        ("modify_user_address", {"user_id": "ada_park_1001", **NEW}),
        ("modify_user_address", {"user_id": "ada_park_1001", **ADA_HOME}),
    ]
    assert _score(mini_domain, "2", calls, nl=[True, True]).reward == 1.0
    assert _score(mini_domain, "2", calls[:1], nl=[True, True]).db is False


def test_communicate_is_a_substring_check_without_commas_and_needs_no_lookup(mini_domain: Any) -> None:
    # τ²'s rule: the value said counts even when the agent never looked it up (guessed, or told by the user).
    guessed = _score(mini_domain, "4", [], ["Your TRACKING number is 900000000001!"])
    assert guessed.reward == 1.0 and guessed.communicate == [True]
    assert _score(mini_domain, "4", [], ["It is 900-000-000-001."]).reward == 0.0
    assert _score(mini_domain, "4", [], ["900,000,000,001"]).reward == 1.0  # the message's commas go
    assert communicated("52.25", ["That kettle costs $52.25."])
    assert not communicated("1,000", ["It costs 1,000 dollars."])  # the info's commas stay: never met
    assert not communicated("52.25", ["   ", ""])
    # Both parts of an airline-style basis must hold.
    task1 = mini_domain.task("1")
    gold = _gold_calls(task1)
    assert _score(mini_domain, "1", gold, ["The 1.5L kettle is 52.25."]).reward == 1.0
    silent = _score(mini_domain, "1", gold, ["Done."])
    assert (
        silent.reward == 0.0 and silent.db and silent.detail == ["COMMUNICATE: the agent never said '52.25'"]
    )


def test_action_checks_follow_tau2s_argument_rule(mini_domain: Any) -> None:
    user = ("get_user_details", {"user_id": "ada_park_1001"})
    order = ("get_order_details", {"order_id": "#W1000002"})
    assert _score(mini_domain, "3", [user, order]).reward == 1.0
    assert _score(mini_domain, "3", [order, user]).reward == 1.0  # any order
    wrong = _score(mini_domain, "3", [user, ("get_order_details", {"order_id": "#W1000001"})])
    assert wrong.reward == 0.0 and wrong.actions == [True, False]
    assert wrong.detail == ["ACTION: no call matches gold action 3_1 (get_order_details)"]
    # τ²'s quirk: without compare_args only the call's own arguments are compared, so a call with
    # none matches the gold action of its name (even though the tool refused it).
    bare = _score(mini_domain, "3", [("get_user_details", {}), order])
    assert bare.reward == 1.0
    assert _score(mini_domain, "3", [("get_user_details", {}), order], strict=True).reward == 0.0
    extra = ("get_user_details", {"user_id": "ada_park_1001", "verbose": True})
    assert _score(mini_domain, "3", [extra, order]).reward == 0.0  # an extra argument differs
    # compare_args=[]: any call of the name matches; the DB part still holds the agent to the state.
    assert _score(mini_domain, "7", [("transfer_to_human_agents", {"summary": "refund"})]).reward == 1.0
    assert _score(mini_domain, "7", []).reward == 0.0


def test_action_matches_on_the_named_arguments() -> None:
    from arena.public.tau2.model import GoldAction

    gold = GoldAction(action_id="a", name="f", arguments={"x": 1, "y": [1, 2]}, compare_args=["y"])
    assert action_matches(gold, CallRecord(name="f", arguments={"x": 9, "y": [1, 2]}))
    assert not action_matches(gold, CallRecord(name="f", arguments={"y": [2, 1]}))
    assert not action_matches(gold, CallRecord(name="g", arguments={"x": 1, "y": [1, 2]}))
    plain = GoldAction(action_id="b", name="f", arguments={"x": 1, "y": 2})
    assert action_matches(plain, CallRecord(name="f", arguments={"x": 1}))  # τ²: the call's keys
    assert not action_matches(plain, CallRecord(name="f", arguments={"x": 1}), strict=True)


def test_nl_assertions_take_the_judges_verdicts_and_fail_without_a_judge(mini_domain: Any) -> None:
    missing = _score(mini_domain, "5", [], ["We do not sell bicycles."])
    assert missing.reward == 0.0 and missing.nl is None
    assert missing.detail == ["NL_ASSERTION: no judge verdicts were given (the judge was missing)"]
    half = _score(mini_domain, "5", [], nl=[True, False])
    assert half.reward == 0.0 and half.nl == [True, False]
    assert half.detail == ["NL_ASSERTION: judged unmet: 'The agent does not invent a product.'"]
    assert _score(mini_domain, "5", [], nl=[True, True]).reward == 1.0
    with pytest.raises(ValueError, match="1 verdicts for 2 NL assertions"):
        _score(mini_domain, "5", [], nl=[True])
    # Retail's basis: the state and the judge; a right state with a failed judgement is 0.
    assert _score(mini_domain, "2", _gold_calls(mini_domain.task("2")), nl=[False, True]).reward == 0.0


def test_a_run_that_did_not_stop_scores_zero(mini_domain: Any) -> None:
    task = mini_domain.task("0")
    for termination in ("max_steps", "too_many_errors", "agent_error"):
        score = _score(mini_domain, "0", _gold_calls(task), termination=termination)
        assert score.reward == 0.0 and score.db is None and score.termination == termination
    assert _score(mini_domain, "0", _gold_calls(task), termination="user_stop").reward == 1.0


def test_the_initial_state_runs_the_set_up_and_the_histories_writes(mini_domain: Any) -> None:
    task = mini_domain.task("6")
    start = initial_state(mini_domain, task)
    assert start.get("users", "ben_ortiz_1002")["address"]["address1"] == "40 Bay Street"  # set-up action
    assert start.get("orders", "#W1000003")["address"]["address1"] == "40 Bay Street"  # history's write
    assert (
        initial_state(mini_domain, task, with_history=False).get("orders", "#W1000003")["address"]["zip"]
        == "04101"
    )
    assert [c.name for c in history_calls(task)] == ["modify_pending_order_address"]
    assert history_texts(task) == ["Done: order #W1000003 now ships to 40 Bay Street."]
    gold = replay_gold(mini_domain, task)
    assert gold.store.get("orders", "#W1000003")["status"] == "cancelled"
    assert gold.store.get("orders", "#W1000003")["address"]["address1"] == "40 Bay Street"
    # The history already said the order id: COMMUNICATE holds from it, as in τ²'s full trajectory.
    assert _score(mini_domain, "6", _gold_calls(task)).reward == 1.0
    assert _score(mini_domain, "6", []).reward == 0.0


def test_a_task_without_criteria_scores_one_whatever_the_agent_did(mini_domain: Any) -> None:
    score = _score(mini_domain, "8", [("modify_user_address", {"user_id": "ben_ortiz_1002", **NEW})])
    assert score.reward == 1.0 and score.db is True


def test_env_assertions_and_a_failing_set_up_are_named(mini_domain: Any) -> None:
    task = mini_domain.task("0").model_copy(deep=True)
    task.evaluation_criteria.env_assertions = [
        {"env_type": "assistant", "func_name": "assert_x", "arguments": {}}
    ]
    task.evaluation_criteria.reward_basis = ["DB", "ENV_ASSERTION"]
    store, records = _play(mini_domain, task, _gold_calls(task))
    score = score_task(
        task,
        end_state=store,
        gold=replay_gold(mini_domain, task).store,
        calls=records,
        agent_texts=[],
        termination="agent_stop",
    )
    assert score.reward == 0.0 and score.detail == ["ENV_ASSERTION: Arena's ports cannot run env assertions"]
    bad = mini_domain.task("6").model_copy(deep=True)
    bad.initial_state.initialization_actions[0]["arguments"]["user_id"] = "nobody_0000"
    with pytest.raises(
        Tau2ReplayError,
        match=r"initialization action 0 \(modify_user_address\) failed: Error: User not found",
    ):
        initial_state(mini_domain, bad)


def test_a_domain_without_a_port_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(DomainPortError, match="no Arena port for the τ² domain 'telecom'"):
        domain_port("telecom")
    monkeypatch.setitem(PORTS, "retail", "arena.public.tau2.no_such_port")
    with pytest.raises(DomainPortError, match=r"arena\.public\.tau2\.no_such_port is not installed"):
        domain_port("retail")
