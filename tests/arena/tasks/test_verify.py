"""Verification of every check kind on the real bank environment (real SQLite, real tools)."""

from __future__ import annotations

import sqlite3

import pytest

from arena.env.runtime import Environment
from arena.tasks.model import AnswerCheck, PythonCheck, SqlCheck, StateMatchCheck, Task
from arena.tasks.normalize import distinct_numbers
from arena.tasks.replay import reference_state
from arena.tasks.reward import RewardConfig
from arena.tasks.verify import compare_states, must_sandbox, verify

pytestmark = pytest.mark.anyio

TRANSFER = ("transfer", {"from_account": "ACC-1", "to_account": "ACC-2", "amount": 100})
# The accounts looked up, as an agent paid for a transfer must have (grounded writes).
LOOKUP = ("list_accounts", {})
GOOD_ANSWER = "Moved $100 to savings."


async def _verify(play, env: Environment, task: Task, calls, answer: str, **kwargs):
    instance = env.new_instance()
    try:
        malformed = kwargs.pop("malformed", 0)
        transcript = await play(instance, calls, answer, malformed=malformed, instruction=task.instruction)
        return await verify(task, instance, transcript, env=env, **kwargs)
    finally:
        await instance.aclose()


async def test_correct_episode_with_extra_reads_scores_one(play, bank_env, bank_tasks) -> None:
    task = bank_tasks["move-100-to-savings"]
    calls = [("list_accounts", {}), ("list_accounts", {}), TRANSFER, ("list_accounts", {})]
    verdict = await _verify(play, bank_env, task, calls, GOOD_ANSWER)
    assert verdict.passed, verdict.checks
    assert verdict.reward == 1.0
    assert [c.kind for c in verdict.checks] == ["state_match", "sql", "python", "answer"]


async def test_wrong_amount_fails_most_checks(play, bank_env, bank_tasks) -> None:
    task = bank_tasks["move-100-to-savings"]
    calls = [LOOKUP, ("transfer", {"from_account": "ACC-1", "to_account": "ACC-2", "amount": 50})]
    verdict = await _verify(play, bank_env, task, calls, "Moved $50.")
    by_kind = {c.kind: c for c in verdict.checks}
    assert not by_kind["state_match"].passed
    assert "accounts: 2 row(s) missing, 2 unexpected" in by_kind["state_match"].detail
    assert not by_kind["sql"].passed and "returned 0" in by_kind["sql"].detail
    assert by_kind["python"].passed  # money is still conserved
    assert not by_kind["answer"].passed and "'100'" in by_kind["answer"].detail
    # The python check passed, but the work is not done: nothing pays.
    assert verdict.reward == 0.0 and verdict.penalties["unearned"] == pytest.approx(0.25)
    assert verdict.unearned.startswith("the work is not verified: final state matches the reference")
    assert not verdict.passed


async def test_doing_nothing_earns_no_credit_for_checks_the_untouched_state_passes(
    play, bank_env, bank_tasks
) -> None:
    task = bank_tasks["move-100-to-savings"]
    reads_only = [("list_accounts", {}), ("transfer", {"from_account": "ACC-1", "to_account": "ACC-2"})]
    verdict = await _verify(play, bank_env, task, reads_only, "Moved $100 to savings.")
    by_kind = {c.kind: c for c in verdict.checks}
    assert by_kind["python"].passed  # money is conserved, because nothing moved
    assert by_kind["answer"].passed  # the claim, with the user's own number
    assert verdict.penalties["unearned"] == pytest.approx(0.5)
    assert verdict.unearned == "the task needs a write and the episode made none"
    assert verdict.reward == 0.0 and not verdict.passed


async def test_partial_credit_right_action_wrong_answer(play, bank_env, bank_tasks) -> None:
    calls = [LOOKUP, TRANSFER]
    verdict = await _verify(play, bank_env, bank_tasks["move-100-to-savings"], calls, "All done!")
    assert verdict.reward == pytest.approx(0.75)
    assert not verdict.passed
    assert verdict.score == pytest.approx(0.75)


async def test_malformed_penalty_and_pass_threshold(play, bank_env, bank_tasks) -> None:
    task = bank_tasks["move-100-to-savings"]
    calls = [LOOKUP, TRANSFER]
    verdict = await _verify(play, bank_env, task, calls, GOOD_ANSWER, malformed=2)
    assert verdict.penalties["malformed_calls"] == pytest.approx(0.2)
    assert verdict.reward == pytest.approx(0.8)
    assert not verdict.passed  # default threshold 1.0
    lenient = RewardConfig(pass_threshold=0.75)
    verdict = await _verify(play, bank_env, task, calls, GOOD_ANSWER, malformed=2, config=lenient)
    assert verdict.passed and verdict.reward == pytest.approx(0.8)


async def test_length_penalty_and_clipping(play, bank_env, bank_tasks) -> None:
    task = bank_tasks["move-100-to-savings"]
    config = RewardConfig(malformed_call_penalty=0.0, length_penalty_per_turn=0.05, free_turns=2)
    calls = [("list_accounts", {}), ("list_accounts", {}), TRANSFER]  # 3 call turns + the answer = 4
    verdict = await _verify(play, bank_env, task, calls, GOOD_ANSWER, config=config)
    assert verdict.penalties["length"] == pytest.approx(0.1)
    assert verdict.reward == pytest.approx(0.9)
    verdict = await _verify(play, bank_env, task, [], "", malformed=30)
    assert verdict.reward == 0.0 and not verdict.passed


async def test_state_match_ignore_tables_and_columns(play, bank_env, bank_tasks) -> None:
    base = bank_tasks["move-100-to-savings"]
    calls = [LOOKUP, TRANSFER, ("rename_account", {"account_id": "ACC-2", "nickname": "rainy day"})]
    strict = base.model_copy(update={"checks": [StateMatchCheck()]})
    verdict = await _verify(play, bank_env, strict, calls, GOOD_ANSWER)
    assert not verdict.passed and "accounts: 1 row(s) missing" in verdict.checks[0].detail
    lenient = base.model_copy(update={"checks": [StateMatchCheck(ignore=["accounts.nickname"])]})
    assert (await _verify(play, bank_env, lenient, calls, GOOD_ANSWER)).passed
    no_accounts = base.model_copy(update={"checks": [StateMatchCheck(ignore=["accounts", "transfers"])]})
    assert (await _verify(play, bank_env, no_accounts, [LOOKUP, TRANSFER], "")).passed
    # Ignoring every table leaves nothing to see a missing write in; the write rule still does.
    assert (await _verify(play, bank_env, no_accounts, [], "")).reward == 0.0


async def test_state_match_needs_reference_state(play, bank_env, bank_tasks) -> None:
    task = bank_tasks["checking-balance"]
    instance = bank_env.new_instance()
    transcript = await play(instance, [("list_accounts", {})], "1200.50")
    verdict = await verify(task, instance, transcript)  # neither env nor expected_state
    assert "no reference state" in verdict.checks[0].detail
    expected = await reference_state(bank_env, task)
    verdict = await verify(task, instance, transcript, expected_state=expected)
    assert verdict.passed
    await instance.aclose()


async def test_sql_check_failures_are_details(play, bank_env, bank_tasks, monkeypatch) -> None:
    monkeypatch.setattr("arena.tasks.state_checks.SQL_CHECK_TIMEOUT_S", 0.2)
    base = bank_tasks["checking-balance"]
    checks = [
        SqlCheck(name="syntax", sql="SELEC 1"),
        SqlCheck(name="no row", sql="SELECT 1 FROM accounts WHERE account_id = 'nope'"),
        SqlCheck(name="null", sql="SELECT NULL"),
        SqlCheck(name="writes", sql="DELETE FROM accounts RETURNING 1"),
        SqlCheck(
            name="runaway",
            sql="WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT count(*) > 0 FROM n",
        ),
        SqlCheck(name="initial schema", sql="SELECT (SELECT count(*) FROM initial.transfers) = 1"),
    ]
    verdict = await _verify(play, bank_env, base.model_copy(update={"checks": checks}), [], "")
    details = {c.name: (c.passed, c.detail) for c in verdict.checks}
    assert details["syntax"][0] is False and "query error" in details["syntax"][1]
    assert details["no row"] == (False, "query returned no row")
    assert details["null"][0] is False
    assert details["writes"][0] is False and "readonly" in details["writes"][1]
    assert details["runaway"][0] is False and "took over" in details["runaway"][1]
    assert details["initial schema"][0] is True
    assert verdict.score == pytest.approx(1 / 6)
    assert verdict.reward == 0.0  # a task that only reads pays for its answer, and these have none


async def test_python_check_failures_are_details(play, bank_env, bank_tasks) -> None:
    base = bank_tasks["checking-balance"]
    checks = [
        PythonCheck(name="raises", code="def check(initial, final, answer):\n    return 1 / 0\n"),
        PythonCheck(name="not bool", code="def check(initial, final, answer):\n    return 'yes'\n"),
        PythonCheck(
            name="reads answer", code="def check(initial, final, answer):\n    return 'ok' in answer\n"
        ),
    ]
    verdict = await _verify(play, bank_env, base.model_copy(update={"checks": checks}), [], "ok")
    details = {c.name: (c.passed, c.detail) for c in verdict.checks}
    assert details["raises"] == (False, "check raised ZeroDivisionError: division by zero")
    assert details["not bool"][0] is False and "not bool" in details["not bool"][1]
    assert details["reads answer"][0] is True


@pytest.mark.parametrize(
    ("answer", "passed", "detail"),
    [
        ("You are number 3 in the queue.", True, "answer has the expected values"),
        ("You're third in the queue.", True, "answer has the expected values"),
        ("You're third in line.", False, "missing 'queue'"),  # a plain value stays required
        ("You are 13th in the queue.", False, "missing one of '3', 'third'"),
    ],
)
async def test_answer_check_alternatives(play, bank_env, bank_tasks, answer, passed, detail) -> None:
    base = bank_tasks["checking-balance"]
    check = AnswerCheck(name="queue place", contains=[["3", "third"], "queue"])
    task = base.model_copy(update={"checks": [check]})
    # Provenance has tests of its own: here the values are in the user's words.
    task = task.model_copy(update={"instruction": "Tell me my place (3rd, third) in the queue."})
    verdict = await _verify(play, bank_env, task, [], answer)
    assert (verdict.checks[0].passed, verdict.checks[0].detail) == (passed, detail)


def _dumped_results(transcript_messages) -> str:
    return "Here is everything I found: " + " ".join(
        m.content for m in transcript_messages if m.role == "tool"
    )


async def test_an_answer_that_dumps_or_enumerates_values_earns_no_answer_credit(
    play, bank_env, bank_tasks
) -> None:
    """The right transfer, then answers that hold "100" only by listing everything: both fail."""
    task = bank_tasks["move-100-to-savings"]
    calls = [LOOKUP, TRANSFER] + [LOOKUP] * 12
    instance = bank_env.new_instance()
    try:
        dump = _dumped_results((await play(instance, calls, "")).messages)
    finally:
        await instance.aclose()
    guesses = "I moved one of these amounts: " + ", ".join(str(n) for n in range(60, 141)) + "."
    for answer, problem in [
        (dump, f"answer is {len(dump):,} characters, over the cap of 1,200"),
        (guesses, "answer mentions 81 distinct numbers, over the cap of 40"),
    ]:
        verdict = await _verify(play, bank_env, task, calls, answer)
        by_kind = {c.kind: c for c in verdict.checks}
        assert "100" in answer and not by_kind["answer"].passed
        assert by_kind["answer"].detail == problem
        assert by_kind["state_match"].passed and not verdict.passed
        assert verdict.reward == pytest.approx(0.75)


async def test_a_long_honest_report_passes_and_caps_are_per_check(play, bank_env, bank_tasks) -> None:
    task = bank_tasks["move-100-to-savings"]
    honest = (
        "Done: I moved $100.00 from Everyday Checking (ACC-1) to Savings (ACC-2) on June 3. "
        "Checking went from $2,400.00 to $2,300.00 and savings from $5,000.00 to $5,100.00; "
        "the transfer is final, cost no fee, and your daily limit of $2,500 still has $2,400 left. "
        "Recurring transfers of $50 on the 1st and $75 on the 15th are unchanged."
    )
    assert len(honest) < 1200 and len(distinct_numbers(honest)) < 40
    verdict = await _verify(play, bank_env, task, [LOOKUP, TRANSFER], honest)
    assert verdict.passed, verdict.checks
    answer_check = next(c for c in task.checks if isinstance(c, AnswerCheck))
    strict = answer_check.model_copy(update={"max_chars": 100, "max_numbers": 5})
    strict_task = task.model_copy(update={"checks": [strict]})
    verdict = await _verify(play, bank_env, strict_task, [LOOKUP, TRANSFER], honest)
    assert verdict.checks[0].detail.startswith(f"answer is {len(honest)} characters, over the cap of 100; ")
    assert "distinct numbers, over the cap of 5" in verdict.checks[0].detail


def test_distinct_numbers_count_each_value_once_however_written() -> None:
    assert distinct_numbers("$1,200.50 or 1200.5 USD, 3 and 3.00, RSV-7KQ2 and 12:40") == {
        "1200.5",
        "3",
        "7",
        "12",
        "40",
    }


def test_answer_check_rejects_empty_alternatives() -> None:
    with pytest.raises(ValueError, match="list of alternatives must not be empty"):
        AnswerCheck(contains=[[]])
    with pytest.raises(ValueError, match="must not be blank"):
        AnswerCheck(contains=[["3", " "]])


async def test_python_check_of_synthesized_task_needs_sandbox(
    play, bank_env, bank_tasks, monkeypatch
) -> None:
    manual = bank_tasks["move-100-to-savings"]
    synthesized = manual.model_copy(update={"origin": "graph"})
    assert not must_sandbox(manual, manual.checks[2])
    assert must_sandbox(synthesized, synthesized.checks[2])
    verdict = await _verify(play, bank_env, synthesized, [TRANSFER], GOOD_ANSWER)
    python = next(c for c in verdict.checks if c.kind == "python")
    assert not python.passed and "must run in the sandbox" in python.detail
    monkeypatch.setenv("ARENA_SANDBOX", "all")
    assert must_sandbox(manual, manual.checks[2])


async def test_state_checks_without_executable_state(play, bank_tasks) -> None:
    task = bank_tasks["checking-balance"]
    transcript = await play(None, [], "It holds $1,200.50", instruction="Is it $1,200.50?")
    verdict = await verify(task, None, transcript)
    assert [c.passed for c in verdict.checks] == [False, True]
    assert "executable" in verdict.checks[0].detail


def test_compare_states_reports_tables_and_columns() -> None:
    a, b = sqlite3.connect(":memory:"), sqlite3.connect(":memory:")
    a.executescript("CREATE TABLE t (x, y); INSERT INTO t VALUES (1, 2), (1, 2); CREATE TABLE only_a (z);")
    b.executescript("CREATE TABLE t (x, y); INSERT INTO t VALUES (1, 2); CREATE TABLE only_b (z);")
    problem = compare_states(a, b)
    assert problem is not None
    assert "table only_a unexpected" in problem and "table only_b missing" in problem
    assert "t: 0 row(s) missing, 1 unexpected" in problem
    assert compare_states(a, b, ignore=["only_a", "only_b", "t"]) is None
    b.execute("INSERT INTO t VALUES (1, 2)")
    assert compare_states(a, b, ignore=["only_a", "only_b"]) is None
