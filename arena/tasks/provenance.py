"""Provenance: a value counts only if the agent observed it in this episode, before it used it.

A right value the agent never looked up is a guess, and a policy rewarded for guesses learns to
state plausible values instead of calling tools. The same holds for actions: an agent that
writes `transfer_funds(payee_id="PAY-102")` from memory is paid for an id it never saw, and on a
held-out environment that memory is wrong. So a value counts only when the episode showed it:

- in the user's words (the instruction and every later user message), or
- in a tool result the agent received for a call it made, unless the value was only an echo of
  that call's own name or arguments (a tool that repeats "no order ORD-1234" or
  `{"query": "1042.20"}` would otherwise launder a guess into an observation), and never in the
  error of a malformed call (it quotes what the agent wrote).

Answer values (`answer` checks) may have been seen anywhere in the episode; the identifiers of a
write (`arena.tasks.grounding`) must have been seen before the write was made. Values that must
be worked out rather than copied (a sum, a status inferred from a date) are `derived`: they count
once the episode received a successful result of every read tool the task's reference calls,
i.e. once the agent saw what the value is worked out from.

Answer values compare as `contains_value` does (numbers, currency, dates and case normalized
exactly as the answer check does); identifiers compare as whole tokens (`identifier_pattern`),
so "WEB" is not seen in "Website" and "ACC-1" not in "ACC-12".
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from functools import cached_property, lru_cache
from typing import Any

from arena.tasks.normalize import normalize_text, value_pattern
from arena.tasks.transcript import TranscriptLike

# A value's search pattern over normalized text (`value_pattern` or `identifier_pattern`).
PatternOf = Callable[[str], "re.Pattern[str] | None"]
# What a token continues through: letters, digits, `_`, `-`, and a `.` followed by one of those.
_TOKEN = re.compile(r"[\w\-]+(?:\.[\w\-]+)*")


@lru_cache(maxsize=8192)
def identifier_pattern(value: str) -> re.Pattern[str] | None:
    """The pattern of `value` as a whole token of normalized text (None for a blank value)."""
    needle = normalize_text(value)
    if not needle:
        return None
    return re.compile(r"(?<![\w.\-])" + re.escape(needle) + r"(?![\w\-]|\.\w)")


def contains_identifier(text: str, value: str) -> bool:
    """Whether `value` occurs in `text` as a whole token (both normalized as answers are).

    A token continues through letters, digits, `_` and `-`, and through a `.` that a letter or
    digit follows ("alex.kim@x.io" is one token; a sentence's final "." ends one).
    """
    pattern = identifier_pattern(value)
    return pattern is not None and pattern.search(normalize_text(text)) is not None


class _Text:
    """A message's text, normalized (`normalize_text`) on first use: most verifications never ask."""

    def __init__(self, raw: str) -> None:
        self.raw = raw

    @cached_property
    def normal(self) -> str:
        return normalize_text(self.raw)


@dataclass(frozen=True)
class _Result:
    tool: str
    text: _Text
    echo: _Text  # the call's name and arguments: what a result may repeat without showing anything
    ok: bool
    at: int  # the index of the tool message in the transcript


@dataclass(frozen=True)
class AgentCall:
    """One tool call the agent made: where, with what, and whether it came back a success."""

    name: str
    arguments: dict[str, Any]
    at: int  # the index of the assistant message that made it
    ok: bool  # False for an error result, and for a call that never got a result


@dataclass
class Observations:
    """What one episode showed its agent (user words, tool results) and the calls it made, in order."""

    user: list[tuple[int, _Text]] = field(default_factory=list)
    results: list[_Result] = field(default_factory=list)
    calls: list[AgentCall] = field(default_factory=list)

    @classmethod
    def of(cls, transcript: TranscriptLike) -> Observations:
        """Collect the observations of a transcript (tool messages without a matching call are ignored)."""
        # Ids repeat across turns (Hermes calls are `call_0`, `call_1`, ... in every turn): a tool
        # message answers the latest call with its id, which is the one its turn made.
        latest: dict[str, int] = {}
        calls: list[AgentCall] = []
        echoes: list[_Text] = []
        user: list[tuple[int, _Text]] = []
        results: list[_Result] = []
        for at, message in enumerate(transcript.messages):
            if message.role == "user":
                user.append((at, _Text(message.content)))
            elif message.role == "assistant":
                for call in message.tool_calls:
                    if call.id:
                        latest[call.id] = len(calls)
                        calls.append(AgentCall(name=call.name, arguments=call.arguments, at=at, ok=False))
                        # The name too: "unknown tool '1042.20'" echoes what the agent wrote.
                        echo = call.name + " " + json.dumps(call.arguments, ensure_ascii=False, default=str)
                        echoes.append(_Text(echo))
            elif message.role == "tool" and message.tool_call_id in latest:
                if _malformed(message.content):
                    # A malformed call's error text quotes what the agent wrote: no observation.
                    continue
                index = latest[message.tool_call_id]
                ok = not _is_error(message.content)
                calls[index] = replace(calls[index], ok=ok)
                results.append(
                    _Result(calls[index].name, _Text(message.content), echoes[index], ok=ok, at=at)
                )
        return cls(user=user, results=results, calls=calls)

    @property
    def user_text(self) -> str:
        """Everything the user said, one message a line."""
        return "\n".join(text.raw for _, text in self.user)

    def shows(self, value: str, *, before: int | None = None, pattern: PatternOf = value_pattern) -> bool:
        """Whether the user said `value` or a tool result showed it (not as an echo of its own call).

        `before` counts only what arrived before that message index; `pattern` is how the value is
        found (`value_pattern` for answer values, `identifier_pattern` for row identifiers).
        """
        found = pattern(value)
        if found is None:
            return False

        def arrived(at: int) -> bool:
            return before is None or at < before

        if any(arrived(at) and found.search(text.normal) for at, text in self.user):
            return True
        return any(
            arrived(r.at) and found.search(r.text.normal) and not found.search(r.echo.normal)
            for r in self.results
        )

    def identifiers(self) -> set[str]:
        """Every token (normalized) the episode showed: a quick approximation of `shows` for ids."""
        tokens = {t for _, text in self.user for t in _TOKEN.findall(text.normal)}
        for r in self.results:
            tokens |= set(_TOKEN.findall(r.text.normal)) - set(_TOKEN.findall(r.echo.normal))
        return tokens

    def received(self, tools: Iterable[str], *, before: int | None = None) -> bool:
        """Whether every tool in `tools` returned at least one successful result (before `before`)."""
        ok = {r.tool for r in self.results if r.ok and (before is None or r.at < before)}
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
