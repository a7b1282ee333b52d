"""A scripted user for conversational episodes in tests and demos (no model involved).

The LLM-backed simulator lives in `simulate`; this one replays fixed lines, which makes the
control flow of conversational episodes testable without a model.
"""

from __future__ import annotations

from collections.abc import Sequence

from arena.episode.prompts import USER_STOP_TOKEN
from arena.protocols import UserContext, UserTurn
from arena.types import Message


class ScriptedUser:
    """Replies with the given lines in order, then stops (`UserTurn(stop=True)`).

    `seen` records the conversation each reply was asked for, so tests can check what a user
    simulator is shown (never tool calls or tool results).
    """

    def __init__(self, replies: Sequence[str]) -> None:
        self.replies = list(replies)
        self.seen: list[list[Message]] = []

    async def reply(self, context: UserContext, conversation: list[Message]) -> UserTurn:
        """The next scripted line, or a stop once the script is exhausted."""
        self.seen.append(list(conversation))
        index = len(self.seen) - 1
        if index < len(self.replies):
            return UserTurn(content=self.replies[index])
        return UserTurn(content=USER_STOP_TOKEN, stop=True)
