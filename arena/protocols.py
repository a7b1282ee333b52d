"""The protocols the upper layers implement: chat models and user simulators.

`arena` only depends on these shapes; `simulate` provides the local (transformers) and HTTP
(OpenAI-compatible, vLLM) backends and the TRUSTEE-style simulators.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, Field

from arena.types import Completion, Message, SamplingParams, ToolSpec


class ModelError(RuntimeError):
    """A model backend failed (unreachable, refused, circuit open, output unusable after retries)."""


@runtime_checkable
class ChatModel(Protocol):
    """Anything that turns a conversation (plus optional tools) into a completion."""

    name: str

    async def chat(
        self,
        messages: list[Message],
        *,
        tools: list[ToolSpec] | None = None,
        params: SamplingParams | None = None,
    ) -> Completion:
        """One completion. Raises `ModelError` when the backend fails."""
        ...


class UserTurn(BaseModel):
    """What a (simulated) user says next. `stop` ends the conversation."""

    content: str
    stop: bool = False


class UserContext(BaseModel):
    """What a user simulator knows: its persona and hidden intent, never the environment's internals."""

    intent: str
    persona: str = ""
    ambiguity: float = Field(default=0.0, ge=0.0, le=1.0)
    extra: dict[str, Any] = Field(default_factory=dict)


@runtime_checkable
class UserSimulator(Protocol):
    """Plays the user in conversational episodes."""

    async def reply(self, context: UserContext, conversation: list[Message]) -> UserTurn:
        """The user's next message given the conversation so far (agent's last message last)."""
        ...
