"""How a τ² run starts, as τ²'s orchestrator sets one up: the database, then the opening messages.

Without a message history the agent greets the user and the user speaks next. A task's message
history is laid out as it was recorded: its tool results are the recorded ones, while the calls
in it that change the state run again on the episode's store (τ²'s environment does the same);
the side its last message addresses speaks next.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field

from arena.episode.parser import clean_text
from arena.public.tau2.docstore import DocStore, PortedTool
from arena.public.tau2.domains import DomainPortError
from arena.public.tau2.replay import CallRecord, Tau2ReplayError, apply_initial_state
from arena.types import Message, ToolCall

if TYPE_CHECKING:
    from arena.public.tau2.model import Tau2Domain, Tau2Task

# τ²'s orchestrator opens every conversation without history with a fixed agent greeting.
GREETING = "Hello! How can I help you today?"


class Tau2SetupError(ValueError):
    """The task cannot be played (a part of its initial state the episode does not support)."""


class Opening(BaseModel):
    """The messages a run starts with, which of them the user heard, and who speaks next."""

    messages: list[Message] = Field(default_factory=list)
    spoken: list[bool] = Field(default_factory=list)
    calls: list[CallRecord] = Field(default_factory=list)
    agent_texts: list[str] = Field(default_factory=list)
    next: Literal["agent", "user"] = "user"

    def add(self, message: Message, *, spoken: bool) -> None:
        """Append one message."""
        self.messages.append(message)
        self.spoken.append(spoken)


def history(task: Tau2Task) -> list[dict[str, Any]]:
    """The task's message history (τ²'s message dicts), or none."""
    state = task.initial_state
    return list(state.message_history or []) if state is not None else []


def start_store(domain: Tau2Domain, task: Tau2Task, tools: dict[str, PortedTool]) -> DocStore:
    """The episode's copy of the domain's database as the task starts (its initial state applied)."""
    store = domain.template().copy()
    try:
        apply_initial_state(store, task, domain.name, tools)
    except (Tau2ReplayError, DomainPortError) as exc:
        raise Tau2SetupError(f"task {task.id}: {exc}") from None
    return store


def opening(task: Tau2Task) -> Opening:
    """The greeting, or the task's message history laid out with its recorded results."""
    past = history(task)
    out = Opening()
    if not past:
        out.add(Message(role="assistant", content=GREETING), spoken=True)
        out.agent_texts.append(GREETING)
        return out
    answers = {m.get("id"): m for m in past if m.get("role") == "tool"}
    for raw in past:
        role, content = raw.get("role"), clean_text(str(raw.get("content") or ""))
        if role == "tool":
            continue  # laid out after its call below
        if role not in ("user", "assistant") or (role == "user" and raw.get("tool_calls")):
            raise Tau2SetupError(f"task {task.id}: a {role} history message of a kind not supported")
        calls = [
            ToolCall(id=str(c.get("id") or f"h{i}"), name=str(c["name"]), arguments=c.get("arguments") or {})
            for i, c in enumerate(raw.get("tool_calls") or [])
        ]
        out.add(Message(role=role, content=content, tool_calls=calls), spoken=not calls)
        if role == "assistant" and content:
            out.agent_texts.append(content)
        for call in calls:
            answer = answers.get(call.id) or {}
            result = clean_text(str(answer.get("content") or ""))
            out.calls.append(
                CallRecord(
                    name=call.name, arguments=call.arguments, content=result, error=bool(answer.get("error"))
                )
            )
            out.add(Message(role="tool", content=result, tool_call_id=call.id, name=call.name), spoken=False)
    last = past[-1]
    out.next = "user" if last.get("role") == "assistant" and not last.get("tool_calls") else "agent"
    return out
