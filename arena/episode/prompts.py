"""The policy's system prompt and the text of the observations it sees.

The tool list itself is not here: backends render it from `tools=` through the chat template
(the embedded model's lists each tool as a signature inside `<tools>`), so the system prompt only carries the environment's rules and a short
instruction on how to behave. Training and evaluation build prompts with these same functions.
"""

from __future__ import annotations

import json
from typing import Any, Literal, Protocol

from arena.episode.parser import MalformedCall

USER_STOP_TOKEN = "###STOP###"

_AUTONOMOUS = (
    "Work on the user's request with the tools. Call a tool whenever you need data or need to "
    "change something; never invent ids, prices or results. When the request is fully handled, "
    "reply to the user with a short final answer and no tool call."
)
_CONVERSATIONAL = (
    "You are talking with a user who may reveal what they need over several messages. Ask for "
    "missing details instead of guessing, use the tools to look things up and act, and reply in "
    "plain text (no tool call) whenever you address the user."
)


class EnvironmentInfo(Protocol):
    """What the prompt needs from an environment (`arena.env.runtime.Environment` has it)."""

    title: str
    description: str
    rules: str
    now: str


def build_system_prompt(
    *,
    title: str = "",
    description: str = "",
    rules: str = "",
    now: str = "",
    mode: Literal["autonomous", "conversational"] = "autonomous",
) -> str:
    """The system prompt: who the agent is, the environment's rules, and how to use tools."""
    parts: list[str] = []
    head = f"You are the assistant of {title}." if title else "You are a helpful assistant with tools."
    if description:
        head += f" {description.strip()}"
    parts.append(head)
    if now:
        parts.append(f"The current time is {now}.")
    if rules.strip():
        parts.append("Policy you must follow:\n" + rules.strip())
    parts.append(_CONVERSATIONAL if mode == "conversational" else _AUTONOMOUS)
    return "\n\n".join(parts)


def system_prompt_for(
    env: EnvironmentInfo, mode: Literal["autonomous", "conversational"] = "autonomous"
) -> str:
    """`build_system_prompt` from a loaded environment."""
    return build_system_prompt(
        title=env.title, description=env.description, rules=env.rules, now=env.now, mode=mode
    )


def tool_observation(ok: bool, output: Any, error: str | None) -> str:
    """The text of a tool result as the agent sees it (inside `<tool_response>`)."""
    if not ok:
        return json.dumps({"error": error or "the tool failed"}, ensure_ascii=False)
    if isinstance(output, str):
        return output
    try:
        return json.dumps(output, ensure_ascii=False, default=str)
    except (TypeError, ValueError):  # circular structures: show something rather than fail
        return str(output)


def malformed_observation(error: MalformedCall) -> str:
    """The error observation for a tool call that could not be executed."""
    hint = 'Write each call as <tool_call>{"name": "<tool>", "arguments": {...}}</tool_call>.'
    if error.kind == "unknown_tool":
        hint = "Call only the tools you were given."
    return json.dumps({"error": f"malformed tool call: {error.message}. {hint}"}, ensure_ascii=False)
