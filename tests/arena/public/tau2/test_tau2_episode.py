"""τ² episodes: the orchestration flow, its caps and ends, scoring, the gold replay, pass^k and sampling.

Everything is invented and small (`episode_fakes`): a toy domain over a `DocStore`, a scripted
fake policy, a scripted fake user and a scripted fake judge.
"""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import anyio
import pytest

from arena.protocols import ModelError, UserTurn
from arena.public.tau2.episode import Tau2Limits, Tau2Run, run_task
from arena.public.tau2.gold import GoldPolicy, GoldUser
from arena.public.tau2.model import Tau2Task
from arena.public.tau2.run import is_success, pass_hat_k, pass_hat_ks, play, sample, summarize, trial_seed
from arena.public.tau2.start import GREETING, Tau2SetupError
from arena.types import Completion
from tests.arena.public.tau2.episode_fakes import (
    ASK,
    BYE,
    TOOLS,
    ScriptedFakeJudge,
    ScriptedFakePolicy,
    ScriptedFakeUser,
    ToyDomain,
    call,
    gold_store,
    hermes,
    make_task,
)


def play_toy(
    policy: Any, user: Any, task: Tau2Task | None = None, judge: Any = None, **limits: Any
) -> Tau2Run:
    domain, task = ToyDomain(), task or make_task()
    gold = gold_store(domain, task)
    run = anyio.run(
        lambda: run_task(domain, task, policy, user, Tau2Limits(**limits), judge, tools=TOOLS, gold=gold)
    )
    assert isinstance(run, Tau2Run)
    return run


# --- the flow -------------------------------------------------------------------------------------


def test_greeting_then_user_then_calls_then_reply_until_the_user_stops() -> None:
    policy = ScriptedFakePolicy(
        call("set_balance", account_id="a1", balance=20), Completion(text="Done: it is 20.")
    )
    user = ScriptedFakeUser(ASK, BYE)
    run = play_toy(policy, user)
    assert run.termination == "user_stop"
    assert [m.role for m in run.messages] == ["assistant", "user", "assistant", "tool", "assistant", "user"]
    assert run.messages[0].content == GREETING
    assert run.steps == 5  # user, agent call, tool results, agent reply, user stop
    assert [(c.name, c.arguments, c.error) for c in run.calls] == [
        ("set_balance", {"account_id": "a1", "balance": 20}, False)
    ]
    assert json.loads(run.calls[0].content) == {"owner": "Ann", "balance": 20}
    assert run.agent_texts == [GREETING, "Done: it is 20."]
    assert run.score is not None and run.score.reward == 1.0 and run.score.db is True
    # The user hears the spoken conversation only; its intent is the task's scenario.
    assert [m.role for m in user.seen[-1]] == ["assistant", "user", "assistant"]
    assert "set to 20" in user.contexts[0].intent and user.contexts[0].persona == "brisk"
    # The policy's prompt is the domain policy; it reads the tool result as a tool message.
    first, last = policy.seen[0], policy.seen[-1]
    assert first[0].role == "system" and ToyDomain.policy in first[0].content
    assert last[-1].role == "tool" and last[-1].tool_call_id == "c_set_balance"


def test_hermes_calls_and_the_transfer_tool_are_ordinary_calls() -> None:
    policy = ScriptedFakePolicy(
        hermes("set_balance", account_id="a1", balance=20),
        hermes("transfer_to_human_agents", summary="done"),
        Completion(text="Your balance is 20; I passed you to a human."),
    )
    run = play_toy(policy, ScriptedFakeUser(ASK, UserTurn(content="ok ###TRANSFER###")))
    assert run.termination == "user_stop"
    assert [c.name for c in run.calls] == ["set_balance", "transfer_to_human_agents"]
    assert run.calls[1].content == "Transfer successful"
    assert run.score is not None and run.score.reward == 1.0
    # The Hermes text goes back to the policy as written.
    assert "<tool_call>" in policy.seen[1][-2].content


def test_the_wrong_end_state_scores_zero() -> None:
    policy = ScriptedFakePolicy(
        call("set_balance", account_id="a1", balance=30), Completion(text="It is 20.")
    )
    run = play_toy(policy, ScriptedFakeUser(ASK, BYE))
    assert run.termination == "user_stop"
    assert run.score is not None and run.score.reward == 0.0 and run.score.db is False


def test_max_steps_ends_the_run_with_reward_zero() -> None:
    policy = ScriptedFakePolicy(call("get_account", account_id="a1"))  # looks forever
    run = play_toy(policy, ScriptedFakeUser(ASK), max_steps=7)
    assert run.termination == "max_steps"
    assert run.steps == 7 and len(run.calls) == 3  # the cap waits for the last call's results
    assert run.messages[-1].role == "tool"
    assert run.score is not None and run.score.reward == 0.0


def test_failed_calls_end_the_run_at_max_errors() -> None:
    policy = ScriptedFakePolicy(call("no_such_tool"))
    run = play_toy(policy, ScriptedFakeUser(ASK), max_errors=3)
    assert run.termination == "too_many_errors" and run.errors == 3
    assert all(c.error and c.content == "Error: Tool 'no_such_tool' not found." for c in run.calls)
    assert run.score is not None and run.score.reward == 0.0


def test_a_model_error_ends_the_run_and_scores_zero() -> None:
    policy = ScriptedFakePolicy(ModelError("backend down"))
    run = play_toy(policy, ScriptedFakeUser(ASK))
    assert run.termination == "model_error" and "backend down" in run.detail
    assert run.score is not None and run.score.reward == 0.0


def test_a_malformed_call_is_an_error_result_and_the_run_goes_on() -> None:
    policy = ScriptedFakePolicy(
        Completion(text='<tool_call>{"name": "set_balance", "arguments": {</tool_call>'),
        call("set_balance", account_id="a1", balance=20),
        Completion(text="It is 20 now."),
    )
    run = play_toy(policy, ScriptedFakeUser(ASK, BYE))
    assert run.malformed == 1 and run.errors == 1
    assert run.messages[3].role == "tool" and run.messages[3].content.startswith("Error: malformed tool call")
    assert [c.name for c in run.calls] == ["set_balance"]  # the malformed one is not a call of the run
    assert run.termination == "user_stop" and run.score is not None and run.score.reward == 1.0


def test_an_empty_agent_message_and_a_failing_user_end_the_run() -> None:
    run = play_toy(ScriptedFakePolicy(Completion(text="  ")), ScriptedFakeUser(ASK))
    assert run.termination == "agent_error" and run.score is not None and run.score.reward == 0.0
    run = play_toy(ScriptedFakePolicy(Completion(text="Hi")), ScriptedFakeUser(RuntimeError("helper down")))
    assert run.termination == "user_error" and "helper down" in run.detail


def test_nl_assertions_go_to_the_judge_when_the_basis_asks() -> None:
    task = make_task(["DB", "NL_ASSERTION"])
    script = (call("set_balance", account_id="a1", balance=20), Completion(text="Your balance is 20."))
    judge = ScriptedFakeJudge(True)
    run = play_toy(ScriptedFakePolicy(*script), ScriptedFakeUser(ASK, BYE), task, judge)
    assert run.score is not None and run.score.nl == [True] and run.score.reward == 1.0
    assert "The agent confirms the new balance." in judge.prompts[0][-1].content
    assert "Your balance is 20." in judge.prompts[0][-1].content
    run = play_toy(ScriptedFakePolicy(*script), ScriptedFakeUser(ASK, BYE), task, ScriptedFakeJudge(False))
    assert run.score is not None and run.score.nl == [False] and run.score.reward == 0.0
    run = play_toy(ScriptedFakePolicy(*script), ScriptedFakeUser(ASK, BYE), task, None)
    assert run.score is not None and run.score.nl is None and "no judge" in run.nl_detail
    judge = ScriptedFakeJudge(True)  # not asked about a run that ended early
    play_toy(ScriptedFakePolicy(ModelError("x")), ScriptedFakeUser(ASK), task, judge)
    assert judge.prompts == []


def test_the_message_history_comes_first_and_its_writes_run_again() -> None:
    history = [
        {"role": "user", "content": "Set a1 to 20 please."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "h1", "name": "set_balance", "arguments": {"account_id": "a1", "balance": 20}}
            ],
        },
        {"role": "tool", "id": "h1", "content": "(recorded)", "requestor": "assistant"},
    ]
    task = make_task(initial_state={"message_history": history})
    policy = ScriptedFakePolicy(Completion(text="It is 20 now."))
    user = ScriptedFakeUser(BYE)
    run = play_toy(policy, user, task)
    assert GREETING not in run.agent_texts  # the history replaces the greeting
    assert [m.role for m in run.messages] == ["user", "assistant", "tool", "assistant", "user"]
    assert [(c.name, c.content) for c in run.calls] == [("set_balance", "(recorded)")]
    assert policy.seen[0][-1].content == "(recorded)"  # the agent speaks first, after the tool result
    assert [m.role for m in user.seen[0]] == ["user", "assistant"]  # the user hears no calls
    # The policy made no call: the end state is right because the history's write ran again.
    assert run.termination == "user_stop" and run.score is not None and run.score.db is True
    assert run.score.reward == 1.0
    bad = make_task(initial_state={"initialization_data": {"agent_data": {}}})
    with pytest.raises(Tau2SetupError):
        play_toy(policy, ScriptedFakeUser(BYE), bad)


def test_the_gold_played_through_the_episode_scores_full_marks() -> None:
    task = make_task(["DB", "ACTION", "COMMUNICATE"])
    run = play_toy(GoldPolicy(task), GoldUser(), task)
    assert run.termination == "user_stop"
    assert run.score is not None and run.score.reward == 1.0
    assert run.score.actions == [True] and run.score.communicate == [True]


# --- pass^k and sampling --------------------------------------------------------------------------


def test_pass_hat_k_is_the_unbiased_estimate_averaged_over_tasks() -> None:
    assert pass_hat_k(4, 2, 1) == 0.5
    assert pass_hat_k(4, 2, 2) == pytest.approx(1 / 6)
    assert pass_hat_k(4, 2, 3) == 0.0 and pass_hat_k(3, 3, 3) == 1.0
    ks = pass_hat_ks({"a": [True, True, False, False], "b": [True] * 4})
    assert ks == pytest.approx({1: 0.75, 2: (1 / 6 + 1) / 2, 3: 0.5, 4: 0.5})
    assert set(pass_hat_ks({"a": [True] * 3, "b": [True] * 2})) == {1, 2}  # k up to the fewest trials
    assert pass_hat_ks({}) == {}
    with pytest.raises(ValueError):
        pass_hat_k(2, 1, 3)
    assert is_success(1.0 - 1e-9) and not is_success(0.99)


def test_summarize_pools_runs_per_task() -> None:
    def run(task_id: str, trial: int, reward: float, termination: str = "user_stop") -> Tau2Run:
        from arena.public.tau2.reward import Tau2Score

        score = Tau2Score(reward=reward, basis=["DB"], termination=termination)
        return Tau2Run(task_id=task_id, trial=trial, termination=termination, score=score, seconds=2.0)

    runs = [run("a", 0, 1.0), run("a", 1, 0.0, "max_steps"), run("b", 0, 1.0), run("b", 1, 1.0)]
    s = summarize("toy", runs)
    assert (s.tasks, s.trials, s.successes) == (2, 4, 3)
    assert s.pass_hat_k == pytest.approx({1: 0.75, 2: 0.5})
    assert s.terminations == {"user_stop": 3, "max_steps": 1} and s.seconds_per_run == 2.0


def test_sampling_is_fixed_by_the_seed_and_stable_across_limits() -> None:
    tasks = [SimpleNamespace(id=str(i)) for i in range(30)]
    five, ten = sample(tasks, 5, seed=0), sample(tasks, 10, seed=0)
    assert len(five) == 5 and {t.id for t in five} <= {t.id for t in ten}
    assert [t.id for t in five] == sorted((t.id for t in five), key=int)  # in the tasks' order
    assert sample(tasks, 5, seed=0) == five and sample(tasks, 5, seed=1) != five
    assert sample(tasks, None, seed=3) == tasks and sample(tasks, 99, seed=3) == tasks
    assert trial_seed(0, "a", 0) == trial_seed(0, "a", 0) != trial_seed(0, "a", 1)


def test_play_gives_sampled_trials_their_own_seed() -> None:
    task, domain = make_task(), ToyDomain()
    policy = ScriptedFakePolicy(Completion(text="Hello"))
    limits = Tau2Limits(temperature=0.7, max_steps=2)
    for trial in (0, 1):
        run = anyio.run(
            lambda t=trial: play(
                domain,
                task,
                policy,
                ScriptedFakeUser(ASK),
                limits,
                trial=t,
                tools=TOOLS,
                gold=gold_store(domain, task),
            )
        )
        assert run.trial == trial
    assert [p.seed for p in policy.params] == [trial_seed(None, "t1", 0), trial_seed(None, "t1", 1)]
