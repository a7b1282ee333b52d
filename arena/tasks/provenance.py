"""Provenance of answer values: a value counts only if the agent observed it in this episode.

A right value the agent never looked up is a guess, and a policy rewarded for guesses learns to
state plausible values instead of calling tools. So an `answer` check credits an expected value
only when the episode showed it to the agent:

- in the user's words (the instruction and every later user message), or
- in a tool result the agent received for a call it made, unless the value was only an echo of
  that call's own name or arguments (a tool that repeats "no order ORD-1234" or
  `{"query": "1042.20"}` would otherwise launder a guess into an observation), and never in the
  error of a malformed call (it quotes what the agent wrote).

Values the answer must work out rather than copy (a sum, a status inferred from a date) are
listed in the check's `derived`: they count once the episode received a successful result of
every read tool the task's reference calls, i.e. once the agent saw what the value is worked out
from. Comparison goes through `contains_value`, so numbers, currency, dates and case are
normalized exactly as the answer check does.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field

from arena.tasks.normalize import contains_value
from arena.tasks.transcript import TranscriptLike


@dataclass(frozen=True)
class _Result:
    tool: str
    text: str
    echo: str  # the call's name and arguments: what a result may repeat without showing anything
    ok: bool


@dataclass
class Observations:
    """What one episode showed its agent: user words and tool results (with the calls behind them)."""

    user_text: str = ""
    results: list[_Result] = field(default_factory=list)

    @classmethod
    def of(cls, transcript: TranscriptLike) -> Observations:
        """Collect the observations of a transcript (tool messages without a matching call are ignored)."""
        calls: dict[str, tuple[str, str]] = {}
        user: list[str] = []
        results: list[_Result] = []
        for message in transcript.messages:
            if message.role == "user":
                user.append(message.content)
            elif message.role == "assistant":
                for call in message.tool_calls:
                    if call.id:
                        # The name too: "unknown tool '1042.20'" echoes what the agent wrote.
                        echo = call.name + " " + json.dumps(call.arguments, ensure_ascii=False, default=str)
                        calls[call.id] = (call.name, echo)
            elif message.role == "tool" and message.tool_call_id in calls and not _malformed(message.content):
                # A malformed call's error text quotes what the agent wrote: no observation.
                tool, echo = calls[message.tool_call_id]
                results.append(_Result(tool, message.content, echo, ok=not _is_error(message.content)))
        return cls(user_text="\n".join(user), results=results)

    def shows(self, value: str) -> bool:
        """Whether the user said `value` or a tool result showed it (not as an echo of its own call)."""
        if contains_value(self.user_text, value):
            return True
        return any(contains_value(r.text, value) and not contains_value(r.echo, value) for r in self.results)

    def received(self, tools: Iterable[str]) -> bool:
        """Whether every tool in `tools` returned at least one successful result."""
        ok = {r.tool for r in self.results if r.ok}
        return all(t in ok for t in tools)


def _malformed(content: str) -> bool:
    """The observation `arena.episode.prompts.malformed_observation` writes for an unusable call."""
    return content.startswith('{"error": "malformed tool call:')


def _is_error(content: str) -> bool:
    """A failed call's observation: `{"error": ...}` in episodes, `error: ...` in replayed references."""
    if content.startswith("error:"):
        return True
    try:
        data = json.loads(content)
    except ValueError:
        return False
    return isinstance(data, dict) and set(data) == {"error"}
