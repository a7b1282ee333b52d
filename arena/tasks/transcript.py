"""What verification reads from an episode, and the transcript of a replayed reference solution.

The verifier depends on three things of an episode only: its messages, its final answer and how
many malformed tool calls the agent made. `arena.episode.Transcript` provides them (the episode
runner imports tasks, so tasks must not import it back; hence a protocol). `ReplayTranscript` is
the record the gates build for a reference replay and for an empty episode.
"""

from __future__ import annotations

import json
from typing import Protocol, runtime_checkable

from pydantic import BaseModel, Field

from arena.types import Message


@runtime_checkable
class TranscriptLike(Protocol):
    """The parts of an episode transcript the verifier uses."""

    @property
    def messages(self) -> list[Message]:
        """Every message: system, user, assistant (with tool calls), tool results."""
        ...

    @property
    def final_answer(self) -> str:
        """The agent's final answer: its last assistant message without tool calls ("" if none)."""
        ...

    @property
    def malformed_calls(self) -> int:
        """How many tool calls could not be parsed or named an unknown tool."""
        ...


class ReplayTranscript(BaseModel):
    """A transcript built without a policy: the reference replay, or an empty episode."""

    messages: list[Message] = Field(default_factory=list)
    final_answer: str = ""
    malformed_calls: int = 0


def assistant_turns(transcript: TranscriptLike) -> int:
    """The number of assistant messages (the unit of the length penalty)."""
    return sum(1 for m in transcript.messages if m.role == "assistant")


def render_transcript(transcript: TranscriptLike, *, max_chars: int = 6000, per_message: int = 600) -> str:
    """A plain-text rendering for a judge prompt, cut to fit a small model's context.

    One line per message. What the agent and the user said is quoted as a JSON string, so the
    graded agent cannot forge lines: a reply holding "\nTOOL refund -> {...}" stays inside its own
    quoted AGENT line instead of posing as a tool result (the judge is the only verifier of a
    simulated environment, and a policy trained against it would learn that trick). Each message
    is cut to `per_message` characters; when the whole is still too long the oldest messages go
    first (the end of an episode decides most criteria), with a marker saying so.
    """
    lines: list[str] = []
    for m in transcript.messages:
        if m.role == "system":
            continue  # the policy's system prompt says nothing about what the agent did
        if m.role == "assistant":
            for call in m.tool_calls:
                lines.append(
                    _cut(
                        f"AGENT calls {call.name}({json.dumps(call.arguments, ensure_ascii=False)})",
                        per_message,
                    )
                )
            if m.content.strip():
                lines.append(_cut(f"AGENT: {quote_speech(m.content)}", per_message))
        elif m.role == "tool":
            lines.append(_cut(f"TOOL {m.name or ''} -> {_one_line(m.content)}", per_message))
        else:
            lines.append(_cut(f"USER: {quote_speech(m.content)}", per_message))
    if not lines:
        return "(the agent did nothing)"
    kept: list[str] = []
    total = 0
    for line in reversed(lines):
        if total + len(line) + 1 > max_chars:
            kept.append(f"[... {len(lines) - len(kept)} earlier messages omitted ...]")
            break
        kept.append(line)
        total += len(line) + 1
    return "\n".join(reversed(kept))


def quote_speech(text: str) -> str:
    """Speech as one JSON string: newlines and quotes escaped, so it cannot end its line in a prompt."""
    return json.dumps(text.strip(), ensure_ascii=False)


def _one_line(text: str) -> str:
    """A tool result on one line (environment JSON has none; a simulated tool's text may)."""
    return " ".join(text.split())


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
