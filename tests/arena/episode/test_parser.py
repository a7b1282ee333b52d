"""Tool-call parsing: the Hermes cases, every malformed kind, native calls, and fuzzing."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from arena.episode.parser import CLOSE_TAG, OPEN_TAG, native_tool_calls, parse_tool_calls
from arena.types import ToolCall

KNOWN = {"get_item", "set_item"}


def block(body: str) -> str:
    return f"{OPEN_TAG}\n{body}\n{CLOSE_TAG}"


def test_several_calls_with_content_and_string_arguments() -> None:
    text = (
        "Let me look.\n"
        + block('{"name": "get_item", "arguments": {"key": "a"}}')
        + "\n"
        + block('{"name": "set_item", "arguments": "{\\"key\\": \\"b\\", \\"value\\": \\"ü\\"}"}')
    )
    turn = parse_tool_calls(text, known_tools=KNOWN)
    assert turn.content == "Let me look."
    assert [(c.id, c.name, c.arguments) for c in turn.calls] == [
        ("call_0", "get_item", {"key": "a"}),
        ("call_1", "set_item", {"key": "b", "value": "ü"}),
    ]
    assert turn.errors == []
    assert turn.has_tool_activity


def test_plain_answer_has_no_tool_activity() -> None:
    turn = parse_tool_calls("  The colour is blue.  ")
    assert turn.content == "The colour is blue."
    assert not turn.has_tool_activity


def test_missing_arguments_means_no_arguments_and_parameters_alias() -> None:
    turn = parse_tool_calls(
        block('{"name": "get_item"}') + block('{"name": "set_item", "parameters": {"k": 1}}')
    )
    assert [c.arguments for c in turn.calls] == [{}, {"k": 1}]


def test_every_malformed_kind_is_reported_in_order_with_ids() -> None:
    text = "".join(
        [
            block('{"name": "get_item", "arguments": {"key": "a"'),  # bad JSON
            block('["get_item"]'),  # not an object
            block('{"arguments": {}}'),  # missing name
            block('{"name": "set_item", "arguments": [1, 2]}'),  # arguments not an object
            block('{"name": "set_item", "arguments": "not json"}'),  # string, not JSON
            block('{"name": "launch_rocket", "arguments": {}}'),  # unknown tool
            "oops " + CLOSE_TAG,  # stray close
            OPEN_TAG + '{"name": "get_item", "arguments": {}}',  # unclosed at the end
        ]
    )
    turn = parse_tool_calls(text, known_tools=KNOWN)
    assert turn.calls == []
    kinds = [e.kind for e in turn.in_order()]  # type: ignore[union-attr]
    assert kinds == [
        "bad_json",
        "not_an_object",
        "missing_name",
        "bad_arguments",
        "bad_arguments",
        "unknown_tool",
        "stray_close_tag",
        "unclosed_tag",
    ]
    assert [e.id for e in turn.in_order()] == [f"call_{i}" for i in range(8)]
    unknown = next(e for e in turn.errors if e.kind == "unknown_tool")
    assert unknown.name == "launch_rocket" and "get_item" in unknown.message
    assert turn.content == "oops"


def test_nested_open_tag_closes_nothing() -> None:
    text = OPEN_TAG + " " + block('{"name": "get_item", "arguments": {"key": "x"}}')
    turn = parse_tool_calls(text, known_tools=KNOWN)
    assert [e.kind for e in turn.errors] == ["unclosed_tag"]
    assert [c.name for c in turn.calls] == ["get_item"]
    assert [x.id for x in turn.in_order()] == ["call_0", "call_1"]


def test_pathological_json_is_an_error_not_an_exception() -> None:
    deep = "[" * 5000 + "]" * 5000
    huge = "1" * 10000
    turn = parse_tool_calls(
        block(deep)
        + block(f'{{"name": "get_item", "arguments": {{"n": {huge}}}}}')
        + block('{"name": "get_item", "arguments": ' + '{"a": ' * 40 + "1" + "}" * 40 + "}")
    )
    assert [e.kind for e in turn.errors] == ["bad_json", "bad_json", "bad_json"]


def test_lone_surrogates_are_replaced_so_the_turn_serializes() -> None:
    turn = parse_tool_calls("hi \ud800 " + block('{"name": "get_item", "arguments": {"key": "\\udc00"}}'))
    turn.model_dump_json()
    assert turn.calls[0].arguments == {"key": "?"}
    assert turn.content == "hi ?"


def test_native_calls_keep_ids_and_check_names() -> None:
    calls = [
        ToolCall(id="abc", name="get_item", arguments={"key": "a"}),
        ToolCall(id="", name="nope", arguments={}),
        ToolCall(id="x2", name=" ", arguments={}),
    ]
    turn = native_tool_calls(calls, content=" thinking ", known_tools=KNOWN)
    assert turn.content == "thinking"
    assert [(c.id, c.name) for c in turn.calls] == [("abc", "get_item")]
    assert [(e.id, e.kind) for e in turn.errors] == [("call_1", "unknown_tool"), ("x2", "missing_name")]
    assert [x.id for x in turn.in_order()] == ["abc", "call_1", "x2"]


# ---- fuzzing: whatever the text, the parser returns, and what it returns serializes ----

_FRAGMENTS = st.sampled_from(
    [
        OPEN_TAG,
        CLOSE_TAG,
        "<tool_call",
        "</tool_call",
        '{"name": "get_item", "arguments": {"key": "a"}}',
        '{"name": ',
        '"arguments": "{\\"key\\": 1}"',
        "{",
        "}",
        "[",
        "]",
        '"',
        "\\u",
        "\\ud800",
        "null",
        "1e999",
        "\n",
        "ünïcødé 🙂",
        "\x00",
    ]
)
_TEXT = st.one_of(
    st.text(max_size=300),
    st.lists(st.one_of(_FRAGMENTS, st.text(max_size=12)), max_size=40).map("".join),
)


@settings(max_examples=400, deadline=None)
@given(_TEXT, st.booleans())
def test_fuzz_parser_never_raises(text: str, check_names: bool) -> None:
    turn = parse_tool_calls(text, known_tools=KNOWN if check_names else None)
    json.loads(turn.model_dump_json())
    assert len(turn.order) == len(turn.calls) + len(turn.errors)
    # Every opening tag is accounted for by a call or an error.
    assert text.count(OPEN_TAG) <= len(turn.order)
    # Truncating the text anywhere never raises either.
    for cut in (len(text) // 3, len(text) // 2, len(text) - 1):
        parse_tool_calls(text[: max(cut, 0)])


_JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=10,
)


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(sorted(KNOWN)), st.dictionaries(st.text(max_size=8), _JSONISH, max_size=4), st.booleans()
)
def test_fuzz_rendered_calls_round_trip(name: str, arguments: dict, as_string: bool) -> None:
    args = json.dumps(arguments) if as_string else arguments
    turn = parse_tool_calls(
        "x" + block(json.dumps({"name": name, "arguments": args})) + "y", known_tools=KNOWN
    )
    assert turn.errors == []
    assert [(c.name, c.arguments) for c in turn.calls] == [(name, arguments)]
    assert turn.content == "xy"
