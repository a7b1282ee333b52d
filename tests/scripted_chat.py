"""A base for scripted fake chat models (not language models): tests give the reply per request."""

from __future__ import annotations

from arena.types import Completion, Message, SamplingParams, ToolSpec, Usage


class ScriptedChat:
    """A `ChatModel` whose `reply` a test writes; records every request's messages, tools and params."""

    name = "scripted-fake-chat"

    def __init__(self) -> None:
        self.requests: list[tuple[list[Message], list[ToolSpec] | None, SamplingParams | None]] = []

    def reply(
        self, messages: list[Message], tools: list[ToolSpec] | None, params: SamplingParams | None
    ) -> Completion | str:
        """The answer to one request: a `Completion`, or its text."""
        raise NotImplementedError

    async def chat(
        self,
        messages: list[Message],
        *,
        tools: list[ToolSpec] | None = None,
        params: SamplingParams | None = None,
    ) -> Completion:
        self.requests.append((messages, tools, params))
        out = self.reply(messages, tools, params)
        if isinstance(out, Completion):
            return out
        return Completion(text=out, usage=Usage(prompt_tokens=10, completion_tokens=10), model=self.name)
