"""`GoldReplayPolicy`: a scripted `ChatModel` (not a language model) that plays an entry's ground truth.

In each user turn it makes the ground truth's calls as native tool calls in one step, then
answers without a call; in a turn whose ground truth is empty it answers at once. Run through
`arena.public.bfcl.episode.run_entry` and scored, every entry must pass: that checks the episode
driver, the backend and the scorer together (`arena bench bfcl --gold`).
"""

from __future__ import annotations

import ast
from typing import Any

from arena.public.bfcl.model import BfclEntry
from arena.types import Completion, Message, SamplingParams, ToolCall, ToolSpec


def tool_call(text: str, tools: list[ToolSpec], index: int) -> ToolCall:
    """A call expression as a native tool call: positional arguments named by the tool's schema."""
    node = ast.parse(text, mode="eval").body
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
        raise ValueError(f"not a plain call: {text!r}")
    name = node.func.id
    spec = next((t for t in tools if t.name == name), None)
    order = list((spec.parameters.get("properties") or {}) if spec else {})
    if len(node.args) > len(order):
        raise ValueError(f"{text!r}: more positional arguments than {name} has parameters")
    arguments: dict[str, Any] = {order[i]: ast.literal_eval(a) for i, a in enumerate(node.args)}
    arguments |= {str(k.arg): ast.literal_eval(k.value) for k in node.keywords}
    return ToolCall(id=f"gold_{index}", name=name, arguments=arguments)


class GoldReplayPolicy:
    """Replays one entry's ground truth (scripted, deterministic; build one per entry)."""

    name = "bfcl-gold-replay"

    def __init__(self, entry: BfclEntry) -> None:
        self.entry = entry

    async def chat(
        self,
        messages: list[Message],
        *,
        tools: list[ToolSpec] | None = None,
        params: SamplingParams | None = None,
    ) -> Completion:
        """The ground truth's calls of the current turn, or a plain answer once they ran."""
        turn = sum(1 for m in messages if m.role == "user") - 1
        truth = self.entry.ground_truth[turn] if 0 <= turn < len(self.entry.ground_truth) else []
        if messages[-1].role != "user" or not truth:
            return Completion(text="Done.")
        calls = [tool_call(text, tools or [], i) for i, text in enumerate(truth)]
        return Completion(text="", tool_calls=calls, finish_reason="tool_calls")
