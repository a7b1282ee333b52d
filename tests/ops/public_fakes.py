"""A scripted fake policy for the public-yardstick tests (no model, named as a fake)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from arena.public.bfcl.gold import GoldReplayPolicy
from arena.types import Completion


class ScriptedBfclPolicy:
    """Replays BFCL's ground truth for the entry whose first user message it recognizes (the first
    entry with that message, base before the other categories); answers anything else, and
    everything once it loaded weights from a folder named `*-bad`, without a call. With
    `always_call` it calls `ls()` at every step, forever."""

    name = "scripted-bfcl-policy"

    def __init__(self, bench: Any, *, always_call: bool = False) -> None:
        self.by_question: dict[str, Any] = {}
        for entries in bench.entries.values():
            for e in entries:
                self.by_question.setdefault(e.turns[0][0]["content"], e)
        self.always_call = always_call
        self.give_up = False
        self.loaded: list[Path] = []
        self.calls = 0
        self.firsts: list[str] = []  # the first user message of every request

    def load_weights(self, path: str | Path) -> None:
        """Record the folder (a `*-bad` one makes it give up), as the local publisher calls it."""
        self.loaded.append(Path(path))
        self.give_up = Path(path).name.endswith("-bad")

    async def chat(self, messages: list[Any], *, tools: Any = None, params: Any = None) -> Completion:
        """The ground truth's calls of the entry, or a plain answer."""
        self.calls += 1
        first = next(m.content for m in messages if m.role == "user")
        self.firsts.append(first)
        if self.always_call:
            return Completion(text='<tool_call>{"name": "ls", "arguments": {}}</tool_call>')
        entry = self.by_question.get(first)
        if entry is None or self.give_up:
            return Completion(text="I cannot help with that.")
        return await GoldReplayPolicy(entry).chat(messages, tools=tools, params=params)
