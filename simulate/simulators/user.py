"""The user simulator: a persona with a hidden intent, talking to the agent (TRUSTEE-style).

It implements `arena.protocols.UserSimulator`. The model sees the persona, the intent, how vague
the user should be (`UserContext.ambiguity`: 0 says everything asked for at once, 1 reveals one
detail per message and only when asked) and the conversation so far from the user's side (never
tool calls or results). It answers with JSON `{"message", "done"}`; `done` ends the conversation
(`UserTurn.stop`) once the goal is handled or the agent cannot help.

Deterministic guards keep it honest: a message may not contain identifiers (order numbers,
codes, long numbers) that appear neither in the intent nor in the conversation — a user knows
only what a user would — and after `max_user_turns` replies the user stops without asking the
model. Invalid answers are retried (see `common.structured_call`).
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel

from arena.protocols import ChatModel, UserContext, UserTurn
from arena.types import Message
from simulate.simulators.common import SimulatorSettings, structured_call

USER_SYSTEM = (
    "You play a customer chatting with an AI assistant. Stay in character: write short, natural "
    "messages as this person would. You know your goal; the assistant does not. Share details of "
    "your goal only as the vagueness level allows, and answer the assistant's questions truthfully "
    "from your goal. Never ask for anything that is not part of your goal and never make up facts, "
    "codes or ids that your goal does not contain. When the assistant has done what you wanted, or "
    'clearly cannot, set "done" to true with a brief closing message. Reply with JSON only.'
)

# Identifier-like tokens a user could not know unless told: codes with digits, long numbers, UUIDs.
_ID_RE = re.compile(
    r"\b(?:[A-Za-z]{1,6}[-_]?\d{3,}[A-Za-z0-9-]*|\d{6,}|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f-]{9,})\b"
)


class UserAnswer(BaseModel):
    """What the model returns for one user turn."""

    message: str
    done: bool


def user_answer_schema(max_chars: int = 200) -> dict[str, Any]:
    """The JSON schema of a user-simulator answer."""
    return {
        "type": "object",
        "properties": {
            "message": {"type": "string", "minLength": 1, "maxLength": max_chars},
            "done": {"type": "boolean"},
        },
        "required": ["message", "done"],
        "additionalProperties": False,
    }


def vagueness(ambiguity: float) -> str:
    """The ambiguity level in words, for the prompt."""
    if ambiguity < 0.34:
        return "low: state what you need plainly, with the details you have"
    if ambiguity < 0.67:
        return "medium: mention your need, and give details only when the assistant asks"
    return "high: start vague, reveal at most one detail per message, only when asked"


def user_messages(context: UserContext, conversation: list[Message]) -> list[Message]:
    """The user simulator's prompt: who you are, your goal, and the chat so far."""
    lines = []
    for m in conversation[-8:]:
        if m.role in ("user", "assistant") and m.content.strip():
            who = "YOU" if m.role == "user" else "ASSISTANT"
            lines.append(f"{who}: {m.content.strip()[:300]}")
    persona = context.persona.strip() or "an ordinary customer"
    text = (
        f"Who you are: {persona}\n"
        f"Your goal (secret from the assistant): {context.intent.strip()}\n"
        f"Vagueness: {vagueness(context.ambiguity)}\n\n"
        "Chat so far:\n" + ("\n".join(lines) if lines else "(nothing yet)") + "\n\n"
        'Write your next message as JSON like {"message":"...","done":false}'
    )
    return [Message(role="system", content=USER_SYSTEM), Message(role="user", content=text)]


def unknown_identifiers(message: str, context: UserContext, conversation: list[Message]) -> list[str]:
    """Identifier-like tokens in `message` that the user could not know."""
    known = " ".join([context.intent, context.persona, *(m.content for m in conversation)]).lower()
    return [tok for tok in _ID_RE.findall(message) if tok.lower() not in known]


class SimulatedUser:
    """A `UserSimulator` backed by a helper model."""

    name = "user"

    def __init__(
        self,
        model: ChatModel,
        settings: SimulatorSettings | None = None,
        *,
        max_user_turns: int = 6,
        max_chars: int = 200,
        closing: str = "Thanks, that's all I needed.",
    ) -> None:
        self.model = model
        self.settings = settings or SimulatorSettings(max_tokens=96, temperature=0.0)
        self.max_user_turns = max_user_turns
        self.closing = closing
        self.schema = user_answer_schema(max_chars)
        self.calls = 0

    async def reply(self, context: UserContext, conversation: list[Message]) -> UserTurn:
        """The user's next message; a stop after `max_user_turns` messages or when the goal is met."""
        said = sum(1 for m in conversation if m.role == "user")
        if said >= self.max_user_turns:
            return UserTurn(content=self.closing, stop=True)

        def check(answer: UserAnswer) -> None:
            if not answer.message.strip():
                raise ValueError("empty user message")
            invented = unknown_identifiers(answer.message, context, conversation)
            if invented:
                raise ValueError(f"the user mentions identifiers it cannot know: {invented[:3]}")

        self.calls += 1
        answer, _ = await structured_call(
            self.model,
            user_messages(context, conversation),
            UserAnswer,
            self.schema,
            simulator=self.name,
            settings=self.settings,
            check=check,
        )
        return UserTurn(content=answer.message.strip(), stop=answer.done)
