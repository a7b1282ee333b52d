"""A scripted fake policy (no model): it replays each task's reference calls, then its answer.

`arena bench scale` uses it for its environment-bound measurement (episodes whose cost is the
environment's, not a model's), and the yardstick tests for known outcomes. It is a fake and is
named as one: nothing trains on it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from arena.types import Completion


class ScriptedReferencePolicy:
    """A scripted fake policy: replays each task's reference calls, then its reference answer.

    With `give_up` (or after loading weights from a folder named `*-bad`) it answers at once
    without a call instead, which no task pays for. `load_weights` records what was loaded, as
    the local publisher calls it.
    """

    name = "scripted-reference-policy"

    def __init__(self, tasks: list[Any], *, give_up: bool = False) -> None:
        self.by_instruction = {t.instruction: t for t in tasks}
        self.give_up = give_up
        self.loaded: list[Path] = []
        self.calls = 0
        self.tools_shown: set[int] = set()  # how many tools each request showed

    def load_weights(self, path: str | Path) -> None:
        """Record the folder (a `*-bad` one makes it give up)."""
        self.loaded.append(Path(path))
        self.give_up = Path(path).name.endswith("-bad")

    async def chat(self, messages: list[Any], *, tools: Any = None, params: Any = None) -> Completion:
        """The next reference call of the task whose instruction is the user's message, then its answer."""
        self.calls += 1
        self.tools_shown.add(len(tools or []))
        user = next(m.content for m in messages if m.role == "user")
        task = self.by_instruction.get(user)
        if self.give_up or task is None:
            return Completion(text="I cannot help with that.")
        done = sum(1 for m in messages if m.role == "assistant")
        if done < len(task.reference):
            call = task.reference[done]
            return Completion(
                text=f"<tool_call>{json.dumps({'name': call.name, 'arguments': call.arguments})}</tool_call>"
            )
        return Completion(text=task.answer or "Done.")
