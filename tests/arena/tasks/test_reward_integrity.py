"""Rewards pay only for work done: each rule, on a task that paid a non-working agent before it.

The agents here are the cheapest ones GRPO would find: answer without calling, state the values
without looking them up, read but not write, undo its own write, write the wrong row.
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import pytest

from arena.env.registry import Registry
from arena.episode.parser import MalformedCall
from arena.episode.prompts import malformed_observation
from arena.synth.graph_tasks import synthesize_graph_tasks
from arena.tasks.adversary import ADVERSARIES, AdversaryRunner, run_adversaries, transcript_of
from arena.tasks.gates import adversary_gate, gold_gate, run_gates
from arena.tasks.model import ActionCheck, AnswerCheck, ExpectedCall, SqlCheck, StateMatchCheck, Task
from arena.tasks.provenance import Observations
from arena.tasks.replay import replay_reference
from arena.tasks.toml_io import load_tasks, parse_tasks
from arena.tasks.verify import verify
from arena.types import Message, ToolCall

pytestmark = pytest.mark.anyio

FREEZE = ToolCall(name="freeze_card", arguments={"card_id": "CARD-11"})
UNFREEZE = ToolCall(name="unfreeze_card", arguments={"card_id": "CARD-11"})


@pytest.fixture(scope="module")
def banking():
    return Registry(include_environ=False).get("banking")


def _bundled(env_name: str, task_id: str) -> tuple[object, Task]:
    env = Registry(include_environ=False).get(env_name)
    return env, next(t for t in load_tasks(env.path, env.name) if t.id == task_id)


async def _score(env, task: Task, calls: list[ToolCall], answer: str):
    """Verify an agent that makes `calls` on a fresh instance, then answers `answer`."""
    instance = env.new_instance()
    try:
        results = [await instance.call(c.name, dict(c.arguments)) for c in calls]
        return await verify(task, instance, transcript_of(task, calls, results, answer), env=env)
    finally:
        await instance.aclose()


# --- rule 1: no credit without the work ------------------------------------------------------


async def test_a_claim_without_the_write_earns_nothing() -> None:
    """Before: state checks that hold untouched plus the claimed answer paid the no-call agent."""
    env, task = _bundled("food_delivery", "cancel-mistaken-order")
    verdict = await _score(env, task, [], task.answer or "")
    assert verdict.reward == 0.0
    assert verdict.unearned == "the task needs a write and the episode made none"
    reads = [c for c in task.reference if c.name not in env.write_tools]
    verdict = await _score(env, task, reads, task.answer or "")
    assert verdict.reward == 0.0 and verdict.checks  # every check ran, none pays


async def test_the_work_done_and_the_report_missing_keeps_partial_credit() -> None:
    env, task = _bundled("food_delivery", "cancel-mistaken-order")
    verdict = await _score(env, task, task.reference, "All done!")
    answer_checks = sum(c.kind == "answer" for c in verdict.checks)
    assert answer_checks and not verdict.passed
    assert verdict.reward == pytest.approx(1 - answer_checks / len(verdict.checks))


async def test_a_read_only_task_pays_only_a_right_answer() -> None:
    """Before: "nothing else changed" paid an empty answer on 13 of 14 read-only tasks."""
    env, task = _bundled("banking", "may-groceries-total")
    empty = await _score(env, task, [], "")
    assert next(c for c in empty.checks if c.kind == "state_match").passed
    assert empty.reward == 0.0 and "only for a right answer" in empty.unearned
    assert (await _score(env, task, task.reference, task.answer or "")).reward == 1.0


# --- rule 2: provenance ------------------------------------------------------------------------


async def test_a_right_value_never_looked_up_is_a_guess() -> None:
    env, task = _bundled("banking", "may-groceries-total")
    verdict = await _score(env, task, [], "You spent $1,042.20 on groceries in May.")
    answer = next(c for c in verdict.checks if c.kind == "answer")
    assert not answer.passed and "without having seen it" in answer.detail
    assert verdict.reward == 0.0
    looked_up = await _score(env, task, task.reference, "You spent $1,042.20 on groceries in May.")
    assert looked_up.passed


def test_observations_ignore_echoes_and_malformed_calls() -> None:
    transcript = transcript_of(
        Task(id="t", env="e", instruction="Where is order ORD-7?", checks=[StateMatchCheck()]),
        [ToolCall(name="find", arguments={"total": "1042.20"})],
        [type("R", (), {"ok": True, "output": {"query": "1042.20", "status": "shipped"}, "error": None})()],
        "",
    )
    transcript.messages.append(Message(role="tool", tool_call_id="nowhere", content="99.95"))
    # A native malformed call stays on its message; its error quotes what the agent wrote.
    bad = ToolCall(id="m1", name="lookup", arguments={})
    transcript.messages.append(Message(role="assistant", tool_calls=[bad]))
    error = MalformedCall(id="m1", kind="bad_arguments", message="arguments are not JSON: {total: 77.10")
    transcript.messages.append(Message(role="tool", tool_call_id="m1", content=malformed_observation(error)))
    seen = Observations.of(transcript)
    assert seen.shows("ORD-7")  # the user's words
    assert seen.shows("Shipped")  # a tool result, normalized
    assert not seen.shows("1,042.20")  # only an echo of the call's own argument
    assert not seen.shows("99.95")  # a tool message no call of the agent produced
    assert not seen.shows("77.10")  # the error of a malformed call
    assert seen.received(["find"]) and not seen.received(["find", "other"])


async def test_derived_values_count_only_after_the_reference_reads() -> None:
    env, task = _bundled("flights", "bags-on-seattle-return")
    check = next(c for c in task.checks if isinstance(c, AnswerCheck))
    assert check.derived == ["80"]
    writes = [c for c in task.reference if c.name in env.write_tools]
    blind = await _score(env, task, writes, task.answer or "")  # the right writes, ids from nowhere
    assert not next(c for c in blind.checks if c.kind == "answer").passed
    assert (await _score(env, task, task.reference, task.answer or "")).passed


def test_derived_must_name_expected_values() -> None:
    with pytest.raises(ValueError, match="`derived` names values that are not in `contains`"):
        AnswerCheck(contains=["80"], derived=["40"])


# --- rule 3: action checks ---------------------------------------------------------------------


def _freeze_unfreeze(checks) -> Task:
    return Task(
        id="freeze-then-unfreeze",
        env="banking",
        instruction="Freeze my debit card ending 3318 for a moment, then unfreeze it again.",
        answer="Your card ending 3318 was frozen and is active again.",
        reference=[ToolCall(name="list_cards", arguments={}), FREEZE, UNFREEZE],
        checks=checks,
    )


async def test_work_that_cancels_out_needs_an_action_check(banking) -> None:
    """Before: freeze-then-unfreeze leaves no net change, so doing nothing passed the state check.

    The write rule now stops the agent that does nothing; an agent that freezes and unfreezes
    another card still matches the state, and only the action check sees it.
    """
    bare = _freeze_unfreeze([StateMatchCheck()])
    assert (await gold_gate(banking, bare)).ok
    assert (await _score(banking, bare, [], bare.answer or "")).reward == 0.0
    other = [ToolCall(name="list_cards", arguments={})] + [
        ToolCall(name=c.name, arguments={"card_id": "CARD-12"}) for c in (FREEZE, UNFREEZE)
    ]
    assert (await _score(banking, bare, other, bare.answer or "")).reward == 1.0
    calls = [ExpectedCall(tool=c.name, args=c.arguments) for c in (FREEZE, UNFREEZE)]
    checked = _freeze_unfreeze([StateMatchCheck(), ActionCheck(calls=calls)])
    report = await run_gates(banking, checked)
    assert report.ok, (report.gold.detail, report.adversary.detail)
    assert (await _score(banking, checked, other, checked.answer or "")).reward == 0.0
    cards = ToolCall(name="list_cards", arguments={})
    extra_first = await _score(banking, checked, [cards, UNFREEZE, FREEZE, UNFREEZE], "")
    assert extra_first.passed  # a call before the required ones does not matter
    half = await _score(banking, checked, [cards, FREEZE], "")
    action = next(c for c in half.checks if c.kind == "action")
    assert not action.passed and "unfreeze_card(card_id='CARD-11')" in action.detail


def test_action_checks_in_tasks_toml_name_write_tools(banking) -> None:
    text = """
[[task]]
id = "freeze-then-unfreeze"
instruction = "Freeze my card ending 3318, then unfreeze it."
[[task.reference]]
tool = "freeze_card"
args = { card_id = "CARD-11" }
[[task.reference]]
tool = "unfreeze_card"
args = { card_id = "CARD-11" }
[[task.check]]
kind = "action"
ordered = true
calls = [{ tool = "freeze_card", args = { card_id = "CARD-11" } }, { tool = "unfreeze_card" }]
"""
    (task,) = parse_tasks(text, path="tasks.toml", env="banking", tools=banking.tools)
    check = task.checks[0]
    assert isinstance(check, ActionCheck) and [c.tool for c in check.calls] == [
        "freeze_card",
        "unfreeze_card",
    ]
    with pytest.raises(Exception, match="names 'list_cards', which does not write"):
        parse_tasks(
            text.replace('{ tool = "unfreeze_card" }', '{ tool = "list_cards" }'),
            path="tasks.toml",
            env="banking",
            tools=banking.tools,
        )


async def test_graph_tasks_whose_writes_cancel_out_carry_an_action_check(banking) -> None:
    """Seed 7 on banking draws a walk whose last write undoes an earlier one."""
    result = await synthesize_graph_tasks(banking, 8, seed=7)
    with_action = [t for t in result.tasks if any(isinstance(c, ActionCheck) for c in t.checks)]
    assert with_action, "expected a walk whose writes cancel out"
    for task in with_action:
        assert all(not a.paid for a in await run_adversaries(banking, task))


# --- rule 4: the adversary gate ------------------------------------------------------------------


async def test_a_write_to_the_wrong_row_is_caught(banking) -> None:
    """A check that asks "some card was frozen" pays the agent that froze another card."""
    loose = _freeze_unfreeze(
        [SqlCheck(name="a card frozen", sql="SELECT count(*) = 3 FROM cards WHERE status = 'frozen'")]
    )
    loose = loose.model_copy(update={"reference": [ToolCall(name="list_cards", arguments={}), FREEZE]})
    assert (await gold_gate(banking, loose)).ok
    result = await AdversaryRunner(banking, loose).run("wrong_row")
    assert result.applies and result.paid and "CARD-1" in result.detail
    gate = await adversary_gate(banking, loose)
    assert not gate.ok and "wrong_row earns 1.00" in gate.detail


async def test_every_agent_earns_nothing_on_bundled_and_synthesized_tasks() -> None:
    """The acceptance set: every bundled task plus 8 graph tasks (seeds 7 and 11) per executable env."""
    registry = Registry(include_environ=False)
    earned: list[str] = []
    applied: Counter[str] = Counter()
    for env in registry.load_all().values():
        if env.kind != "executable":
            continue
        tasks = load_tasks(env.path, env.name, tools=env.tools)
        for seed in (7, 11):
            synthesized = (await synthesize_graph_tasks(env, 8, seed=seed)).tasks
            assert len(synthesized) == 8, (env.name, seed)
            tasks += synthesized
        for task in tasks:
            gold = await gold_gate(env, task)
            assert gold.ok and gold.verdict is not None and gold.verdict.reward == 1.0, (
                task.full_id,
                gold.detail,
            )
            for agent in await run_adversaries(env, task):
                applied[agent.agent] += agent.applies
                if agent.paid:
                    earned.append(f"{task.full_id}: {agent.agent} earns {agent.reward} ({agent.detail})")
    assert not earned, "\n".join(earned)
    # Every agent met tasks it applies to (the counts of a run: 250 tasks, 74 for the blind writer).
    assert all(applied[a] >= 50 for a in ADVERSARIES), applied
    assert sum(applied.values()) > 1500, applied


async def test_the_rules_alone_hold_on_almost_every_ungated_candidate(monkeypatch) -> None:
    """With the gate switched off, the rules (not rejections) keep nearly every agent at 0."""
    import arena.synth.filters as filters

    async def no_adversary_gate(*_args, **_kwargs):
        from arena.tasks.gates import GateResult

        return GateResult(gate="adversary", ok=True, detail="off for this test")

    monkeypatch.setattr(filters, "adversary_gate", no_adversary_gate)
    env = Registry(include_environ=False).get("email")
    tasks = (await synthesize_graph_tasks(env, 30, seed=3)).tasks
    paid = [t.full_id for t in tasks if any(a.paid for a in await run_adversaries(env, t))]
    assert len(paid) <= 2, paid


def test_envs_check_names_a_task_a_non_working_agent_earns_on(tmp_path: Path, capsys) -> None:
    from ops.cli import main

    env, _ = _bundled("banking", "freeze-missing-debit-card")
    folder = tmp_path / "banking"
    shutil.copytree(env.path, folder)
    with (folder / "tasks.toml").open("a") as f:
        f.write(
            '\n[[task]]\nid = "lazy-freeze"\ninstruction = "Freeze my debit card ending 3318."\n'
            'answer = "Card frozen."\n[[task.reference]]\ntool = "list_cards"\n'
            '[[task.reference]]\ntool = "freeze_card"\nargs = { card_id = "CARD-11" }\n'
            '[[task.check]]\nkind = "state_match"\nignore = ["cards.status"]\n'
            '[[task.check]]\nkind = "sql"\nname = "no card cancelled"\n'
            "sql = \"SELECT COUNT(*) = 1 FROM cards WHERE status = 'cancelled'\"\n"
        )
    code = main(["envs", "check", str(folder), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 1 and not out["ok"]
    (record,) = out["environments"]
    bad = [t for t in record["tasks"] if not t["ok"]]
    assert [t["task"] for t in bad] == ["banking/lazy-freeze"]
    assert set(bad[0]["paid"]) >= {"wrong_row"}
    main(["envs", "check", str(folder)])
    assert "task banking/lazy-freeze: adversary gate: " in capsys.readouterr().out


async def test_replay_reference_logs_writes(banking) -> None:
    _, task = _bundled("banking", "freeze-missing-debit-card")
    instance, _ = await replay_reference(banking, task)
    try:
        assert [(w.tool, w.arguments) for w in instance.write_log] == [
            ("freeze_card", {"card_id": "CARD-11"})
        ]
    finally:
        await instance.aclose()


async def test_shaping_only_scores_plain_partial_credit_for_training_loop_tests() -> None:
    """The training loop's synthetic letters task needs per-check credit; real tasks never get it."""
    from arena.tasks.reward import RewardConfig

    env, task = _bundled("banking", "may-groceries-total")
    halves = task.model_copy(
        update={
            "checks": [
                AnswerCheck(name="a", contains=["groceries"]),
                AnswerCheck(name="b", contains=["never said"]),
            ]
        }
    )
    instance = env.new_instance()
    try:
        transcript = transcript_of(halves, [], [], "groceries")
        strict = await verify(halves, instance, transcript, env=env)
        shaping = await verify(halves, instance, transcript, env=env, config=RewardConfig(shaping_only=True))
    finally:
        await instance.aclose()
    assert strict.reward == 0.0 and shaping.reward == 0.5
