"""The one history function: head kept, last N turns kept, parsed calls not rendered twice."""

from __future__ import annotations

import pytest

from arena.episode.history import policy_view
from arena.types import Message, ToolCall


def conversation() -> list[Message]:
    call = ToolCall(id="call_0", name="get_item", arguments={})
    return [
        Message(role="system", content="S"),
        Message(role="user", content="task"),
        Message(role="assistant", content='<tool_call>{"name": "get_item"}</tool_call>', tool_calls=[call]),
        Message(role="tool", content="r1", tool_call_id="call_0"),
        Message(role="assistant", content="question?"),
        Message(role="user", content="answer"),
        Message(role="assistant", content="", tool_calls=[call]),  # a native call: kept as is
        Message(role="tool", content="r2", tool_call_id="call_0"),
    ]


def test_full_history_strips_only_the_duplicate_parsed_calls() -> None:
    view = policy_view(conversation())
    assert [m.content for m in view] == [m.content for m in conversation()]
    assert view[2].tool_calls == [] and view[6].tool_calls == conversation()[6].tool_calls


@pytest.mark.parametrize(
    ("keep", "contents"),
    [
        (1, ["S", "task", "", "r2"]),
        (2, ["S", "task", "question?", "answer", "", "r2"]),
        (0, ["S", "task", "r2"]),
        (9, [m.content for m in conversation()]),
    ],
)
def test_window_keeps_head_and_last_turns(keep: int, contents: list[str]) -> None:
    assert [m.content for m in policy_view(conversation(), keep)] == contents


def test_bad_window() -> None:
    with pytest.raises(ValueError, match="keep_last_turns"):
        policy_view(conversation(), -1)
