"""Each failure-taxonomy rule, on hand-built episodes (no model)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from arena.env.state import RowChange, StateDiff, TableDiff
from arena.episode.transcript import Transcript
from arena.tasks.model import Task
from arena.tasks.reward import Verdict
from diagnose.taxonomy import CATEGORIES, PRECEDENCE, SEVERITY, Failure, classify

WRITES = ["cancel_order", "update_address"]


def _classify(
    b: SimpleNamespace, tr: Transcript, v: Verdict | None = None, t: Task | None = None, **kw: Any
) -> Failure:
    return classify(t or b.task(), tr, v or b.verdict(), write_tools=WRITES, **kw)


def test_every_category_has_a_severity_and_a_precedence() -> None:
    assert set(SEVERITY) == set(CATEGORIES) == set(PRECEDENCE)


def test_format_error_when_the_runner_gave_up(b: SimpleNamespace) -> None:
    tr = b.transcript(finish="format_error", malformed=[("bad_json", None)] * 3, answer="")
    f = _classify(b, tr)
    assert f.primary == "format_error"


def test_one_recovered_malformed_call_is_not_the_cause(b: SimpleNamespace) -> None:
    calls = [
        b.call("get_order", {"order_id": "O-1"}),
        b.call("cancel_order", {"order_id": "O-1"}, writes=True),
    ]
    tr = b.transcript(calls, malformed=[("bad_json", None)])
    f = _classify(b, tr, b.verdict(state=True))
    assert "format_error" not in f.categories
    assert f.primary == "wrong_answer"


def test_unknown_tool(b: SimpleNamespace) -> None:
    tr = b.transcript(malformed=[("unknown_tool", "delete_order")], answer="I could not.")
    f = _classify(b, tr)
    assert f.primary == "unknown_tool"
    assert f.tools[0] == "delete_order"


def test_invalid_arguments_from_results(b: SimpleNamespace) -> None:
    calls = [b.call("cancel_order", {"order": "O-1"}, ok=False, kind="invalid_arguments")]
    f = _classify(b, b.transcript(calls))
    assert f.primary == "invalid_arguments"
    assert "cancel_order" in f.tools


def test_tool_error_ignored(b: SimpleNamespace) -> None:
    calls = [
        b.call("get_order", {"order_id": "O-1"}),
        b.call("cancel_order", {"order_id": "O-1"}, ok=False, kind="tool_error"),
    ]
    f = _classify(b, b.transcript(calls, answer="Your order is cancelled."))
    assert f.primary == "tool_error_ignored"
    assert f.tools[0] == "cancel_order"


def test_tool_error_recovered_is_not_ignored(b: SimpleNamespace) -> None:
    calls = [
        b.call("cancel_order", {"order_id": "O1"}, ok=False, kind="tool_error"),
        b.call("cancel_order", {"order_id": "O-1"}, writes=True),
    ]
    f = _classify(b, b.transcript(calls), b.verdict(state=True))
    assert "tool_error_ignored" not in f.categories


def test_wrong_entity(b: SimpleNamespace) -> None:
    calls = [
        b.call("get_order", {"order_id": "O-2"}),
        b.call("cancel_order", {"order_id": "O-2"}, writes=True),
    ]
    f = _classify(b, b.transcript(calls))
    assert f.primary == "wrong_entity"
    assert set(f.tools) == {"get_order", "cancel_order"}
    # The wrong record also means the required write is missing: a consequence, ranked lower.
    assert "missing_write" in f.categories


def test_an_ungrounded_write_is_its_own_root_cause(b: SimpleNamespace) -> None:
    """The verifier names the write arguments no look-up showed: the policy wrote from memory."""
    calls = [b.call("cancel_order", {"order_id": "O-1"}, writes=True)]
    verdict = b.verdict(state=True).model_copy(update={"ungrounded": ["cancel_order(order_id='O-1')"]})
    f = _classify(b, b.transcript(calls), verdict)
    assert f.primary == "ungrounded_write" and f.tools == ["cancel_order"]
    assert "cancel_order(order_id='O-1')" in f.details["ungrounded_write"]
    assert _classify(b, b.transcript(calls), b.verdict(state=True)).primary != "ungrounded_write"


def test_wrong_entity_from_diffs(b: SimpleNamespace) -> None:
    t = b.task(reference=[("cancel_order", {"reason": "x"})])
    calls = [b.call("cancel_order", {"reason": "x"}, writes=True)]

    def diff(key: str) -> StateDiff:
        change = RowChange(
            key={"order_id": key}, before={"s": "placed"}, after={"s": "cancelled"}, columns=["s"]
        )
        return StateDiff(tables={"orders": TableDiff(key=["order_id"], changed=[change])})

    f = _classify(b, b.transcript(calls), t=t, agent_diff=diff("O-2"), expected_diff=diff("O-1"))
    assert f.primary == "wrong_entity"


def test_missing_write(b: SimpleNamespace) -> None:
    calls = [b.call("get_order", {"order_id": "O-1"}), b.call("list_orders")]
    f = _classify(b, b.transcript(calls, answer="Order O-1 is placed."))
    assert f.primary == "missing_write"
    assert f.tools == ["cancel_order"]


def test_extra_write(b: SimpleNamespace) -> None:
    calls = [
        b.call("get_order", {"order_id": "O-1"}),
        b.call("cancel_order", {"order_id": "O-1"}, writes=True),
        b.call("update_address", {"order_id": "O-1", "address": "x"}, writes=True),
    ]
    f = _classify(b, b.transcript(calls))
    assert f.primary == "extra_write"
    assert f.tools == ["update_address"]


def test_collateral_write_from_diffs(b: SimpleNamespace) -> None:
    calls = [
        b.call("get_order", {"order_id": "O-1"}),
        b.call("cancel_order", {"order_id": "O-1"}, writes=True),
    ]
    touched = StateDiff(
        tables={"orders": TableDiff(key=["id"]), "refunds": TableDiff(key=["id"], added=[{"id": 1}])}
    )
    expected = StateDiff(tables={"orders": TableDiff(key=["id"])})
    f = _classify(b, b.transcript(calls), agent_diff=touched, expected_diff=expected)
    assert f.primary == "extra_write"


def test_wrong_answer(b: SimpleNamespace) -> None:
    calls = [
        b.call("get_order", {"order_id": "O-1"}),
        b.call("cancel_order", {"order_id": "O-1"}, writes=True),
    ]
    f = _classify(b, b.transcript(calls, answer="Done."), b.verdict(state=True))
    assert f.primary == "wrong_answer"
    assert f.categories == ["wrong_answer"]


def test_gave_up_early(b: SimpleNamespace) -> None:
    t = b.task(
        reference=[
            ("get_order", {"order_id": "O-1"}),
            ("list_orders", {}),
            ("cancel_order", {"order_id": "O-1"}),
        ]
    )
    f = _classify(b, b.transcript([], answer="Sorry, I can't help."), t=t)
    assert f.primary == "gave_up_early"
    assert "missing_write" in f.categories


def test_max_turns(b: SimpleNamespace) -> None:
    calls = [b.call("list_orders", turn=i) for i in range(5)]
    f = _classify(b, b.transcript(calls, finish="max_turns", answer=""))
    assert f.primary == "max_turns"


def test_simulator_fault_wins_over_everything(b: SimpleNamespace) -> None:
    tr = b.transcript(finish="env_error", malformed=[("bad_json", None)], answer="")
    assert _classify(b, tr).primary == "simulator_fault"
    calls = [b.call("get_order", {"order_id": "O-1"}, ok=False, kind="internal")]
    assert _classify(b, b.transcript(calls)).primary == "simulator_fault"


def test_other_when_no_rule_explains(b: SimpleNamespace) -> None:
    t = b.task(reference=[("get_order", {"order_id": "O-1"})])
    calls = [b.call("get_order", {"order_id": "O-1"})]
    f = _classify(b, b.transcript(calls), b.verdict(answer=True), t=t)
    assert f.primary == "other"
    assert "state" in f.details["other"]
