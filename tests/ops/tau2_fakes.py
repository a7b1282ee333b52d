"""Scripted fakes for the τ² public-yardstick tests (no model; named as fakes): a policy that plays
the gold actions of the task it recognizes, and a helper that plays the user and the judge."""

from __future__ import annotations

import json
import re
from typing import Any

from arena.types import Completion, Message, ToolCall

OPENER = "Hello, I need help: "


class ScriptedTau2Policy:
    """Recognizes the task from the user's first message (its reason for calling), then makes the
    task's gold agent calls one per step and says its communicate values; answers anything it does
    not recognize without a call."""

    name = "scripted-tau2-policy"

    def __init__(self, tasks: list[Any]) -> None:
        self.by_reason = {_reason(t): t for t in tasks}
        self.calls = 0

    async def chat(self, messages: list[Message], **_: Any) -> Completion:
        """The next gold call of the recognized task, or its closing words."""
        self.calls += 1
        first = next((m.content for m in messages if m.role == "user"), "")
        task = self.by_reason.get(first.removeprefix(OPENER).strip())
        if task is None:
            return Completion(text="I cannot help with that.")
        actions = [a for a in task.evaluation_criteria.actions if a.requestor == "assistant"]
        done = sum(len(m.tool_calls or []) for m in messages if m.role == "assistant")
        if done < len(actions):
            action = actions[done]
            call = ToolCall(id=f"call_{done}", name=action.name, arguments=dict(action.arguments))
            return Completion(tool_calls=[call])
        return Completion(text=" ".join(["Done.", *task.evaluation_criteria.communicate_info]))


class ScriptedTau2Helper:
    """Plays τ²'s user through Arena's `SimulatedUser` (asks with the task's reason for calling,
    then stops) and its judge (every assertion met)."""

    name = "scripted-tau2-helper"

    def __init__(self) -> None:
        self.calls = 0

    async def chat(self, messages: list[Message], **_: Any) -> Completion:
        """A user turn or a judge answer, by which prompt it is."""
        self.calls += 1
        prompt = messages[-1].content
        if "Your goal (secret from the assistant):" in prompt:
            if "\nYOU: " in prompt:
                return Completion(text=json.dumps({"message": "Thank you, that is all.", "done": True}))
            reason = re.search(r"Reason for call:\s*(.+)", prompt)
            said = OPENER + (reason.group(1).strip() if reason else "")
            return Completion(text=json.dumps({"message": said, "done": False}))
        criteria = prompt.split("Criteria:\n", 1)[-1].split("\n\n", 1)[0]
        n = len(re.findall(r"^\d+\. ", criteria, flags=re.M))
        verdicts = [{"criterion": i, "reason": "met", "passed": True} for i in range(1, n + 1)]
        return Completion(text=json.dumps({"verdicts": verdicts}))


def _reason(task: Any) -> str:
    instructions = task.user_scenario.instructions
    return str(getattr(instructions, "reason_for_call", instructions)).strip()
