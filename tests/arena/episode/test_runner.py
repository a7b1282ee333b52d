"""The episode runner's control flow, on a scripted fake model and a tiny key-value instance."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from arena.episode.runner import EpisodeConfig, EpisodeSetupError, run_episode
from arena.episode.transcript import Transcript
from arena.episode.users import ScriptedUser
from arena.protocols import UserContext
from arena.types import Usage


def run(coro_fn: Any, *args: Any, **kwargs: Any) -> Transcript:
    return anyio.run(lambda: coro_fn(*args, **kwargs))


def test_autonomous_episode_records_everything(fakes: Any) -> None:
    model = fakes.Model(
        [
            "I will set it.\n" + fakes.call("set_item", {"key": "colour", "value": "blue"}),
            fakes.call("get_item", {"key": "colour"}) + fakes.call("get_item", {"key": "missing"}),
            "Colour is now blue.",
        ]
    )
    inst = fakes.Instance()
    t = run(run_episode, model, inst, fakes.Task(), system_prompt="SYS")
    assert t.finish == "answered"
    assert t.final_answer == "Colour is now blue."
    assert inst.data["colour"] == "blue"
    assert [c.call.name for c in t.calls] == ["set_item", "get_item", "get_item"]
    assert [c.result.ok for c in t.calls] == [True, True, False]
    assert {k: (v.ok, v.failed) for k, v in t.tool_stats.items()} == {"set_item": (1, 0), "get_item": (1, 1)}
    assert t.malformed_calls == 0
    assert [m.role for m in t.messages] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "tool",
        "assistant",
    ]
    # Assistant messages keep the raw text and the parsed calls; tool messages answer call ids.
    assert "<tool_call>" in t.messages[2].content
    assert t.messages[2].tool_calls[0].name == "set_item"
    assert [m.tool_call_id for m in t.messages if m.role == "tool"] == ["call_0", "call_0", "call_1"]
    assert json.loads(t.messages[6].content) == {"error": "no item 'missing'"}
    # The policy gets its raw text back, without a second rendering of the calls.
    second_prompt = model.calls[1]
    assert second_prompt[2].content == t.messages[2].content and second_prompt[2].tool_calls == []
    assert len(t.turns) == 3 and t.usage.completion_tokens > 0
    assert t.timings.total_s >= t.timings.model_s >= 0
    # The transcript round-trips through JSON (the store keeps it as a JSON column).
    assert Transcript.model_validate_json(t.model_dump_json()) == t


def test_malformed_calls_become_observations_then_format_error(fakes: Any) -> None:
    model = fakes.Model(
        ["<tool_call>{bad json</tool_call>"], default='<tool_call>{"name": "nope"}</tool_call>'
    )
    t = run(
        run_episode, model, fakes.Instance(), fakes.Task(), config=EpisodeConfig(max_consecutive_malformed=3)
    )
    assert t.finish == "format_error"
    assert t.malformed_calls == 3
    assert [e.error.kind for e in t.malformed_errors] == ["bad_json", "unknown_tool", "unknown_tool"]
    tool_msgs = [m for m in t.messages if m.role == "tool"]
    assert all("malformed tool call" in m.content for m in tool_msgs)
    assert t.calls == []


def test_resending_a_refused_call_unchanged_ends_the_episode_as_stuck(fakes: Any) -> None:
    missing = fakes.call("get_item", {"key": "missing"})
    other = fakes.call("get_item", {"key": "other"})
    model = fakes.Model([missing, other, missing], default="done")
    config = EpisodeConfig(max_repeated_failures=2)
    t = run(run_episode, model, fakes.Instance(), fakes.Task(), config=config)
    assert t.finish == "stuck" and "get_item failed 2 times" in t.finish_detail
    assert len(t.turns) == 3 and [m.role for m in t.messages][-1] == "tool"
    # Off by default: the same script runs on to its answer.
    t = run(
        run_episode,
        model.__class__([missing, other, missing], default="done"),
        fakes.Instance(),
        fakes.Task(),
    )
    assert t.finish == "answered" and t.final_answer == "done"


def test_a_good_turn_resets_the_malformed_streak(fakes: Any) -> None:
    bad = "<tool_call>{</tool_call>"
    good = fakes.call("get_item", {"key": "greeting"})
    model = fakes.Model([bad, bad, good, bad, bad, "ok"])
    t = run(
        run_episode, model, fakes.Instance(), fakes.Task(), config=EpisodeConfig(max_consecutive_malformed=3)
    )
    assert t.finish == "answered" and t.malformed_calls == 4


def test_caps_max_turns_and_tokens(fakes: Any) -> None:
    looping = fakes.Model([], default=fakes.call("get_item", {"key": "greeting"}))
    t = run(run_episode, looping, fakes.Instance(), fakes.Task(), config=EpisodeConfig(max_turns=4))
    assert t.finish == "max_turns" and len(t.turns) == 4

    spend = fakes.Completion(
        text=fakes.call("get_item", {"key": "greeting"}), usage=Usage(prompt_tokens=5, completion_tokens=40)
    )
    model = fakes.Model([spend] * 10)
    cfg = EpisodeConfig(max_tokens_per_turn=64, max_total_tokens=100)
    t = run(run_episode, model, fakes.Instance(), fakes.Task(), config=cfg)
    assert t.finish == "max_tokens" and len(t.turns) == 3
    # Each turn asks for no more than what is left of the budget.
    assert [p.max_tokens for p in model.params_seen] == [64, 60, 20]


def test_model_error_env_error_and_timeout(fakes: Any) -> None:
    t = run(run_episode, fakes.Model([fakes.ModelError("backend down")]), fakes.Instance(), fakes.Task())
    assert t.finish == "model_error" and "backend down" in t.finish_detail

    t = run(run_episode, fakes.Model([fakes.call("crash_env", {})]), fakes.Instance(), fakes.Task())
    assert t.finish == "env_error" and "worker died" in t.finish_detail

    slow = fakes.Model(["never"], delay_s=5.0)
    t = run(run_episode, slow, fakes.Instance(), fakes.Task(), config=EpisodeConfig(turn_timeout_s=0.05))
    assert t.finish == "model_error" and "did not answer" in t.finish_detail


def test_native_tool_calls_keep_backend_ids(fakes: Any) -> None:
    native = fakes.Completion(
        text="",
        tool_calls=[
            fakes.ToolCall(id="srv-1", name="set_item", arguments={"key": "k", "value": "v"}),
            fakes.ToolCall(id="srv-2", name="ghost", arguments={}),
        ],
        finish_reason="tool_calls",
    )
    t = run(run_episode, fakes.Model([native, "done"]), fakes.Instance(), fakes.Task())
    assert t.finish == "answered" and t.turns[0].native_tool_calls
    assistant = t.messages[2]
    assert [c.id for c in assistant.tool_calls] == ["srv-1", "srv-2"]
    assert [m.tool_call_id for m in t.messages if m.role == "tool"] == ["srv-1", "srv-2"]
    assert t.malformed_calls == 1 and t.malformed_errors[0].error.kind == "unknown_tool"


def test_conversational_episode_with_scripted_user(fakes: Any) -> None:
    user = ScriptedUser(["It's the colour setting.", "Blue, please."])
    model = fakes.Model(
        [
            "What would you like to change?",
            "Which value?",
            fakes.call("set_item", {"key": "colour", "value": "blue"}),
            "Done: colour is blue.",
        ]
    )
    task = fakes.Task(mode="conversational", user=UserContext(intent="set colour to blue"))
    inst = fakes.Instance()
    t = run(run_episode, model, inst, task, user=user)
    assert t.finish == "user_stop"
    assert t.final_answer == "Done: colour is blue."
    assert inst.data["colour"] == "blue"
    assert [m.role for m in t.messages].count("user") == 3
    # The user simulator sees the plain conversation only: no tool calls, no tool results.
    last_view = user.seen[-1]
    assert [m.role for m in last_view] == ["user", "assistant", "user", "assistant", "user", "assistant"]
    assert all("tool_call" not in m.content for m in last_view)


def test_conversational_needs_a_user(fakes: Any) -> None:
    task = fakes.Task(mode="conversational")
    with pytest.raises(EpisodeSetupError, match="conversational"):
        run(run_episode, fakes.Model([]), fakes.Instance(), task)


def test_token_chain_with_the_real_template(fakes: Any) -> None:
    model = fakes.Model(
        [
            fakes.call("set_item", {"key": "a", "value": "b"}),
            fakes.call("get_item", {"key": "a"}),
            "All set.",
        ],
        token_ids=True,
    )
    t = run(run_episode, model, fakes.Instance(), fakes.Task())
    assert t.tokens_complete and t.chain_breaks == [] and len(t.chains) == 1
    chain = t.chains[0]
    ids, mask, lps = chain.completion_ids(), chain.mask(), chain.logprobs()
    assert len(ids) == len(mask) == len(lps)
    # The whole sequence is exactly the last prompt plus the last completion.
    last = model.calls[-1]
    full = fakes.codepoints(fakes.render(last, fakes.Instance().tool_specs)) + fakes.codepoints(
        "All set." + fakes.END
    )
    assert chain.all_ids() == full
    # Mask is 1 exactly on the three completions; the tool responses in between are 0.
    policy_text = "".join(chr(i) for i, m in zip(ids, mask, strict=True) if m)
    set_call = fakes.call("set_item", {"key": "a", "value": "b"})
    get_call = fakes.call("get_item", {"key": "a"})
    assert policy_text == f"{set_call}{fakes.END}{get_call}{fakes.END}All set.{fakes.END}"
    context_text = "".join(chr(i) for i, m in zip(ids, mask, strict=True) if not m)
    assert "<tool_response>" in context_text and "<tool_call>" not in context_text
    assert {lp for lp, m in zip(lps, mask, strict=True) if not m} == {0.0}
    assert {lp for lp, m in zip(lps, mask, strict=True) if m} == {-0.5}


def test_history_window_starts_new_chains(fakes: Any) -> None:
    calls = [fakes.call("get_item", {"key": "greeting"})] * 4 + ["bye"]
    model = fakes.Model(calls, token_ids=True)
    cfg = EpisodeConfig(history_turns=2)
    t = run(run_episode, model, fakes.Instance(), fakes.Task(), config=cfg)
    assert t.finish == "answered"
    # Turns 0-2 see the whole history; from turn 3 on the oldest turns are dropped.
    assert [sum(m.role == "assistant" for m in c) for c in model.calls] == [0, 1, 2, 2, 2]
    assert [b.turn for b in t.chain_breaks] == [3, 4]
    assert {b.reason for b in t.chain_breaks} == {"truncated_history"}
    assert sum(len(c.policy_turns()) for c in t.chains) == 5


def test_rerendered_prompt_is_a_recorded_break_not_a_spliced_mask(fakes: Any) -> None:
    a = fakes.Completion(
        text=fakes.call("get_item", {"key": "greeting"}),
        prompt_token_ids=[1, 2, 3],
        completion_token_ids=[4, 5],
    )
    b = fakes.Completion(text="ok", prompt_token_ids=[1, 2, 3, 9, 5, 6], completion_token_ids=[7])
    t = run(run_episode, fakes.Model([a, b]), fakes.Instance(), fakes.Task())
    assert len(t.chains) == 2
    assert t.chain_breaks[0].reason == "rerendered" and t.chain_breaks[0].position == 3
    assert t.chains[1].prompt_ids() == [1, 2, 3, 9, 5, 6] and t.chains[1].mask() == [1]


def test_tokens_a_grammar_forced_are_recorded_and_out_of_the_mask(fakes: Any) -> None:
    a = fakes.Completion(
        text=fakes.call("get_item", {"key": "greeting"}),
        prompt_token_ids=[1, 2, 3],
        completion_token_ids=[4, 5, 6, 7],
        completion_logprobs=[-0.1, -0.2, -0.3, -0.4],
        completion_forced=[0, 2],
    )
    b = fakes.Completion(text="ok", prompt_token_ids=[1, 2, 3, 4, 5, 6, 7, 8], completion_token_ids=[9])
    t = run(run_episode, fakes.Model([a, b]), fakes.Instance(), fakes.Task())
    chain = t.chains[0]
    assert chain.segments[1].forced == [0, 2]
    assert chain.completion_ids() == [4, 5, 6, 7, 8, 9] and chain.mask() == [0, 1, 0, 1, 0, 1]
    assert Transcript.model_validate_json(t.model_dump_json()).chains[0].mask() == chain.mask()


_PIECES = st.sampled_from(
    ["<tool_call>", "</tool_call>", '{"name": "get_item", "arguments": {"key": "greeting"}}']
)


# `fakes` only hands out classes, so sharing it across hypothesis examples is safe.
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.lists(st.text(max_size=60) | _PIECES, max_size=5).map("".join), min_size=1, max_size=6))
def test_fuzz_runner_never_raises(fakes: Any, outputs: list[str]) -> None:
    model = fakes.Model(outputs, default="<tool_call>")
    t = run(run_episode, model, fakes.Instance(), fakes.Task(), config=EpisodeConfig(max_turns=5))
    assert t.finish in {"answered", "max_turns", "format_error", "max_tokens"}
    Transcript.model_validate_json(t.model_dump_json())


_NATIVE = st.builds(
    lambda name, args, cid: {"name": name, "arguments": args, "id": cid},
    st.sampled_from(["get_item", "set_item", "", " ", "crash", "ghost\ud800"]) | st.text(max_size=8),
    st.dictionaries(st.text(max_size=5), st.text(max_size=5) | st.integers() | st.just("\ud800"), max_size=3),
    st.text(max_size=4) | st.just("id\udfff"),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.lists(_NATIVE, min_size=1, max_size=3), min_size=1, max_size=4), st.text(max_size=30))
def test_fuzz_native_tool_calls_never_raise(fakes: Any, turns: list[list[dict]], content: str) -> None:
    script = [
        fakes.Completion(
            text=content, tool_calls=[fakes.ToolCall(**c) for c in calls if c["name"] != "crash"]
        )
        for calls in turns
    ]
    t = run(
        run_episode, fakes.Model(script), fakes.Instance(), fakes.Task(), config=EpisodeConfig(max_turns=6)
    )
    assert t.finish in {"answered", "max_turns", "format_error"}
    Transcript.model_validate_json(t.model_dump_json())
    # Every tool message answers a call id present on the assistant message before it.
    ids: set[str] = set()
    for m in t.messages:
        if m.role == "assistant":
            ids = {c.id for c in m.tool_calls}
        elif m.role == "tool":
            assert m.tool_call_id in ids
