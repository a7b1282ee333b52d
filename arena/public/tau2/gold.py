"""The gold actions of a τ² task played as a scripted policy, with a scripted user (`arena bench tau2 --gold`).

`GoldPolicy` makes the task's agent actions one call per step, in order, then tells the user the
information the task expects communicated; `GoldUser` asks once and stops at the agent's first
reply after that. Played through `run_task`, a task must then score full marks on every part the
gold can satisfy: the end state (DB), the actions (ACTION) and the communicated information
(COMMUNICATE, satisfied by construction: it checks the plumbing, not a policy). NL assertions
judge how an agent talked, which a scripted gold does not model: `--gold` leaves them unchecked.
Actions a task gives the user (`requestor: user`) cannot be played by the agent and are skipped.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from arena.protocols import UserContext, UserTurn
from arena.types import Completion, Message, SamplingParams, ToolCall, ToolSpec

if TYPE_CHECKING:
    from arena.public.tau2.model import Tau2Task

OPENING = "Hello, I need help with a request."
CLOSING = "Thank you, that is all."


class GoldPolicy:
    """A `ChatModel` that replays a task's gold agent actions, then speaks its expected information."""

    name = "tau2-gold"

    def __init__(self, task: Tau2Task) -> None:
        actions = task.evaluation_criteria.actions
        self.actions = [a for a in actions if a.requestor == "assistant"]
        self.skipped = [a.name for a in actions if a.requestor != "assistant"]
        self.info = list(task.evaluation_criteria.communicate_info)
        self.next = 0

    async def chat(
        self,
        messages: list[Message],
        *,
        tools: list[ToolSpec] | None = None,
        params: SamplingParams | None = None,
    ) -> Completion:
        """The next gold call as a native tool call; after the last, the closing message."""
        if self.next < len(self.actions):
            action = self.actions[self.next]
            self.next += 1
            call = ToolCall(id=f"gold_{self.next}", name=action.name, arguments=dict(action.arguments))
            return Completion(tool_calls=[call])
        said = " ".join(self.info)
        return Completion(text=f"Your request is handled. {said}".strip())


class GoldUser:
    """A `UserSimulator` that asks once and stops when the agent next speaks."""

    async def reply(self, context: UserContext, conversation: list[Message]) -> UserTurn:
        """The opening request, then a stop."""
        if not any(m.role == "user" for m in conversation):
            return UserTurn(content=OPENING)
        return UserTurn(content=CLOSING, stop=True)
