"""Grounded writes and "nothing else changed": each rule on a task whose cheap agent was paid before.

The agents here are the ones GRPO would find on a training environment that keeps one seed
database: write the ids it learned by heart without looking them up, or do the task and then one
more write on another row. Both were paid before these rules; both earn nothing now.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

import arena.tasks.verify as verify_module
from arena.env.loader import load_environment
from arena.env.registry import Registry
from arena.tasks.adversary import AdversaryRunner, transcript_of
from arena.tasks.gates import gold_gate
from arena.tasks.grounding import RowKeys
from arena.tasks.model import NOTHING_ELSE_CHANGED, SqlCheck, StateMatchCheck, Task
from arena.tasks.provenance import contains_identifier
from arena.tasks.toml_io import load_tasks, parse_tasks
from arena.tasks.verify import verify
from arena.types import ToolCall

pytestmark = pytest.mark.anyio

# Arguments whose text the agent composes (a reply, a memo): the reference's wording is one of many.
FREE_TEXT = ("body", "memo", "comment", "title", "reason", "special_requests", "description")


def _bundled(env_name: str, task_id: str) -> tuple[Any, Task]:
    env = Registry(include_environ=False).get(env_name)
    return env, next(t for t in load_tasks(env.path, env.name, tools=env.tools) if t.id == task_id)


async def _score(env: Any, task: Task, calls: list[ToolCall], answer: str | None = None):
    """Verify an agent that makes `calls` on a fresh instance, then answers (the reference answer)."""
    instance = env.new_instance()
    try:
        results = [await instance.call(c.name, dict(c.arguments)) for c in calls]
        transcript = transcript_of(task, calls, results, task.answer or "" if answer is None else answer)
        return await verify(task, instance, transcript, env=env)
    finally:
        await instance.aclose()


def _writes(env: Any, task: Task) -> list[ToolCall]:
    return [c for c in task.reference if c.name in env.write_tools]


@pytest.fixture
def grounding_off(monkeypatch: pytest.MonkeyPatch) -> None:
    """The reward as it was before grounded writes (to show what an agent was paid then)."""
    monkeypatch.setattr(verify_module, "ungrounded_writes", lambda *_a, **_k: [])


# --- grounded writes ---------------------------------------------------------------------------


async def test_the_reference_writes_without_the_look_ups_were_paid(grounding_off) -> None:
    env, task = _bundled("banking", "pay-jamie-concert")
    assert (await _score(env, task, _writes(env, task))).reward == 1.0


async def test_writes_of_ids_never_looked_up_earn_nothing_and_the_verdict_names_them() -> None:
    env, task = _bundled("banking", "pay-jamie-concert")
    blind = await _score(env, task, _writes(env, task))
    assert all(c.passed for c in blind.checks)  # the state is right; the ids were guessed
    assert blind.reward == 0.0 and not blind.passed
    assert blind.ungrounded == [
        "transfer_funds(from_account_id='ACC-1001')",
        "transfer_funds(payee_id='PAY-102')",
    ]
    assert blind.unearned.startswith(
        "a write names a row the episode never showed the agent: transfer_funds("
    )
    looked_up = await _score(env, task, task.reference)
    assert looked_up.passed and looked_up.reward == 1.0 and looked_up.ungrounded == []


async def test_an_echo_of_the_agents_own_call_does_not_ground_an_id() -> None:
    """`get_transactions(account_id="ACC-1001")` shows ACC-1001 back: the agent guessed it first."""
    env, task = _bundled("banking", "pay-jamie-concert")
    guess = ToolCall(name="get_transactions", arguments={"account_id": "ACC-1001"})
    payees = ToolCall(name="list_payees", arguments={"query": "Jamie"})
    verdict = await _score(env, task, [guess, payees, *_writes(env, task)])
    assert verdict.ungrounded == ["transfer_funds(from_account_id='ACC-1001')"]


async def test_an_id_counts_only_when_seen_before_the_write() -> None:
    env, task = _bundled("banking", "pay-jamie-concert")
    after = [ToolCall(name="list_payees", arguments={"query": "Jamie"}), *_writes(env, task)]
    after.append(ToolCall(name="list_accounts", arguments={}))
    assert (await _score(env, task, after)).ungrounded == ["transfer_funds(from_account_id='ACC-1001')"]


async def test_ids_in_the_users_words_or_the_rules_are_grounded(tmp_path: Path) -> None:
    env, task = _bundled("banking", "pay-jamie-concert")
    payees = ToolCall(name="list_payees", arguments={"query": "Jamie"})
    said = task.model_copy(update={"instruction": task.instruction + " Use account ACC-1001."})
    assert (await _score(env, said, [payees, *_writes(env, said)])).reward == 1.0
    folder = tmp_path / "banking"
    shutil.copytree(env.path, folder)
    toml = (folder / "env.toml").read_text()
    (folder / "env.toml").write_text(
        toml.replace('rules = """\n', 'rules = """\nThe customer\'s checking account is ACC-1001.\n', 1)
    )
    ruled = load_environment(folder, cache=False)
    assert "ACC-1001" in ruled.rules
    assert (await _score(ruled, task, [payees, *_writes(ruled, task)])).reward == 1.0


async def test_derived_args_count_once_the_reference_reads_came_back() -> None:
    env, task = _bundled("banking", "pay-jamie-concert")
    derived = task.model_copy(update={"derived_args": ["ACC-1001"]})
    payees = ToolCall(name="list_payees", arguments={"query": "Jamie"})
    accounts = ToolCall(name="list_accounts", arguments={})
    # Every read of the reference (accounts and payees) came back before the write: worked out.
    assert (await _score(env, derived, [accounts, payees, *_writes(env, task)])).reward == 1.0
    # Without the reads the value cannot have been worked out.
    blind = await _score(env, derived, _writes(env, task))
    assert "transfer_funds(from_account_id='ACC-1001')" in blind.ungrounded and blind.reward == 0.0
    with pytest.raises(ValueError, match="`derived_args` names values that no reference call passes"):
        Task.model_validate({**task.model_dump(), "derived_args": ["ACC-9999"]})


def test_identifiers_match_as_whole_tokens() -> None:
    assert not contains_identifier("the Website Relaunch project", "WEB")
    assert contains_identifier("project WEB.", "WEB")
    assert not contains_identifier('{"account_id": "ACC-12"}', "ACC-1")
    assert not contains_identifier("SPR-WEB-15", "WEB")
    assert contains_identifier("Write to alex.kim@northwind.io.", "alex.kim@northwind.io")
    assert not contains_identifier("palex.kim@northwind.io", "alex.kim@northwind.io")
    assert contains_identifier('{"assignee_id": 4, "points": 5}', "4")


def test_only_single_column_keys_name_a_row() -> None:
    """A night of an availability calendar or a seat number is part of a key, not a key."""
    hotels = Registry(include_environ=False).get("hotels")
    rows = RowKeys(hotels.template)
    assert rows.names_row("room_type_id", "RT-1032")
    assert not rows.names_row("check_in", "2025-07-01")
    assert not rows.names_row("guests", 2)  # a number not named like an id
    flights = Registry(include_environ=False).get("flights")
    assert not RowKeys(flights.template).names_row("seat_no", "7D")


async def test_no_bundled_reference_writes_an_id_it_did_not_observe() -> None:
    """Every bundled reference looks up (or is told) every row its writes name."""
    unobserved: list[str] = []
    for env in Registry(include_environ=False).load_all().values():
        if env.kind != "executable":
            continue
        for task in load_tasks(env.path, env.name, tools=env.tools):
            gold = await gold_gate(env, task)
            assert gold.verdict is not None, task.full_id
            unobserved += [f"{task.full_id}: {u}" for u in gold.verdict.ungrounded]
    assert not unobserved, "\n".join(unobserved)


# --- nothing else changed ----------------------------------------------------------------------


def test_a_write_task_without_a_state_match_check_gets_one() -> None:
    banking = Registry(include_environ=False).get("banking")
    text = """
[[task]]
id = "freeze"
instruction = "Freeze my debit card ending 3318."
[[task.reference]]
tool = "list_cards"
[[task.reference]]
tool = "freeze_card"
args = { card_id = "CARD-11" }
[[task.check]]
kind = "sql"
name = "frozen"
sql = "SELECT status = 'frozen' FROM cards WHERE card_id = 'CARD-11'"

[[task]]
id = "look"
instruction = "Which cards do I have?"
[[task.reference]]
tool = "list_cards"
[[task.check]]
kind = "answer"
contains = ["3318"]
"""
    freeze, look = parse_tasks(text, path="tasks.toml", env="banking", tools=banking.tools)
    assert [(c.kind, c.label) for c in freeze.checks] == [
        ("sql", "frozen"),
        ("state_match", NOTHING_ELSE_CHANGED),
    ]
    assert [c.kind for c in look.checks] == ["answer"]  # a task that only reads changes nothing anyway
    # A task that already says what may differ keeps its own check.
    ignoring = freeze.model_copy(update={"checks": [StateMatchCheck(ignore=["cards.status"])]})
    assert ignoring.with_state_guard(banking.write_tools) is ignoring


async def test_a_second_reply_into_another_thread_was_paid_and_now_fails() -> None:
    """The reference reply, then a reply to a message the agent saw in another thread."""
    env, task = _bundled("email", "reply-all-workshop-room")
    inbox = ToolCall(name="search_messages", arguments={"query": "dinner"})
    other = ToolCall(name="reply_to_message", arguments={"message_id": "MSG-1009", "body": "Sounds good!"})
    calls = [*task.reference, inbox, other]
    before = task.model_copy(update={"checks": [c for c in task.checks if c.kind != "state_match"]})
    paid = await _score(env, before, calls)
    assert paid.reward == 1.0 and paid.ungrounded == []  # every id was looked up
    now = await _score(env, task, calls)
    guard = next(c for c in now.checks if c.kind == "state_match")
    assert not guard.passed and guard.detail.startswith("messages: ")
    assert now.reward == 0.0


async def test_every_bundled_write_task_accepts_its_own_wording_of_free_text() -> None:
    """The state guard compares rows, so each task ignores what the agent words itself (a reply's
    body, a memo): a reference reworded where the user did not dictate the text still matches."""
    strict: list[str] = []
    for env in Registry(include_environ=False).load_all().values():
        if env.kind != "executable":
            continue
        for task in load_tasks(env.path, env.name, tools=env.tools):
            said = task.instruction + (task.user.intent if task.user else "")
            reworded, changed = [], False
            for call in task.reference:
                args = dict(call.arguments)
                for name in FREE_TEXT:
                    value = args.get(name)
                    if call.name in env.write_tools and isinstance(value, str) and value not in said:
                        args[name], changed = value + " Thanks!", True
                reworded.append(call.model_copy(update={"arguments": args}))
            if not changed:
                continue
            verdict = await _score(env, task, reworded)
            guard = next(c for c in verdict.checks if c.kind == "state_match")
            if not guard.passed:
                strict.append(f"{task.full_id}: {guard.detail}")
    assert not strict, "\n".join(strict)


async def test_every_bundled_write_task_has_a_state_guard() -> None:
    for env in Registry(include_environ=False).load_all().values():
        if env.kind != "executable":
            continue
        for task in load_tasks(env.path, env.name, tools=env.tools):
            if task.writes(env.write_tools):
                assert any(isinstance(c, StateMatchCheck) for c in task.checks), task.full_id


# --- the two new agents have teeth --------------------------------------------------------------


async def test_writes_without_lookups_is_paid_only_without_grounding(grounding_off, monkeypatch) -> None:
    env, task = _bundled("banking", "pay-jamie-concert")
    paid = await AdversaryRunner(env, task).run("writes_without_lookups")
    assert paid.applies and paid.reward == 1.0
    monkeypatch.undo()
    held = await AdversaryRunner(env, task).run("writes_without_lookups")
    assert held.applies and held.reward == 0.0


async def test_writes_without_lookups_needs_a_row_the_user_does_not_give() -> None:
    env, task = _bundled("banking", "pay-jamie-concert")
    said = task.model_copy(
        update={
            "instruction": "Send PAY-102 $75 from ACC-1001 for the concert tickets (memo: Concert tickets)."
        }
    )
    result = await AdversaryRunner(env, said).run("writes_without_lookups")
    assert not result.applies and "user's words" in result.detail


async def test_extra_write_is_paid_only_without_the_state_guard() -> None:
    env, task = _bundled("email", "reply-all-workshop-room")
    unguarded = task.model_copy(update={"checks": [c for c in task.checks if c.kind != "state_match"]})
    assert any(isinstance(c, SqlCheck) for c in unguarded.checks)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(verify_module, "ungrounded_writes", lambda *_a, **_k: [])
        paid = await AdversaryRunner(env, unguarded).run("extra_write")
    assert paid.applies and paid.reward == 1.0 and paid.detail.startswith("reply_to_message(")
    held = await AdversaryRunner(env, task).run("extra_write")
    assert held.applies and held.reward == 0.0


async def test_an_extra_write_that_changes_nothing_does_not_count() -> None:
    """Setting a card's limit to the limit it has succeeds and changes no row: that attempt does
    not apply (the reference's own state would pay it), while a new limit does."""
    from arena.tasks.adversary import _try
    from arena.tasks.adversary_calls import Attempt

    env = Registry(include_environ=False).get("banking")
    cards = ToolCall(name="list_cards", arguments={})

    def limit(value: float) -> ToolCall:
        return ToolCall(name="set_card_limit", arguments={"card_id": "CARD-11", "daily_limit": value})

    assert await _try(env, Attempt(calls=[cards, limit(1500)], probe=1, must_change=True), None) is None
    changed = await _try(env, Attempt(calls=[cards, limit(900)], probe=1, must_change=True), None)
    assert changed is not None
    instance, results = changed
    await instance.aclose()
    assert results[1].ok
