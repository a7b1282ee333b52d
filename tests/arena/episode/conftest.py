"""Fixtures for episode tests: a scripted fake chat model, a tiny key-value environment instance.

`ScriptedFakeChatModel` is a fake LLM for control-flow tests only (it replays fixed outputs);
runner behaviour on a real model is covered by the `model`-marked tests. When asked to, it
"tokenizes" the prompt by rendering the real Hermes ChatML template and taking code points, which
exercises the token-chain logic against the template the embedded model actually uses.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import jinja2
import pytest

from arena.env.instance import ToolResult
from arena.protocols import ModelError
from arena.types import Completion, Message, SamplingParams, ToolCall, ToolSpec, Usage
from simulate.embedded import tool_chat_template

_TEMPLATE = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)
_TEMPLATE.filters["tojson"] = lambda v: json.dumps(v, ensure_ascii=False)
_CHATML = _TEMPLATE.from_string(tool_chat_template())
END = "<|im_end|>"


def render_chatml(messages: list[Message], tools: list[ToolSpec] | None) -> str:
    """The prompt the embedded model would see (the real template, rendered with jinja2)."""
    return _CHATML.render(
        messages=[m.openai() for m in messages],
        tools=[t.openai()["function"] for t in tools] if tools else None,
        add_generation_prompt=True,
    )


def codepoints(text: str) -> list[int]:
    """A stand-in tokenizer: one token per character (exact and reversible)."""
    return [ord(c) for c in text]


@dataclass
class ScriptedFakeChatModel:
    """A fake LLM replaying scripted outputs: str (text), Completion, or an exception to raise.

    After the script runs out it repeats `default`. With `token_ids=True` it reports prompt and
    completion token ids (code points of the rendered template) and a logprob per token.
    """

    script: Sequence[str | Completion | BaseException]
    default: str = "Done."
    token_ids: bool = False
    name: str = "scripted-fake"
    delay_s: float = 0.0
    calls: list[list[Message]] = field(default_factory=list)
    params_seen: list[SamplingParams] = field(default_factory=list)
    tools_seen: list[list[ToolSpec] | None] = field(default_factory=list)

    async def chat(
        self,
        messages: list[Message],
        *,
        tools: list[ToolSpec] | None = None,
        params: SamplingParams | None = None,
    ) -> Completion:
        import anyio

        self.calls.append(list(messages))
        self.params_seen.append(params or SamplingParams())
        self.tools_seen.append(tools)
        if self.delay_s:
            await anyio.sleep(self.delay_s)
        i = len(self.calls) - 1
        item = self.script[i] if i < len(self.script) else self.default
        if isinstance(item, BaseException):
            raise item
        if isinstance(item, Completion):
            return item
        completion = Completion(
            text=item, usage=Usage(prompt_tokens=10, completion_tokens=max(1, len(item) // 4))
        )
        if self.token_ids:
            prompt = codepoints(render_chatml(messages, tools))
            out = codepoints(item + END)
            completion.prompt_token_ids = prompt
            completion.completion_token_ids = out
            completion.completion_logprobs = [-0.5] * len(out)
            completion.usage = Usage(prompt_tokens=len(prompt), completion_tokens=len(out))
        return completion


KV_TOOLS = [
    ToolSpec(
        name="get_item",
        description="Read a value.",
        parameters={"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]},
    ),
    ToolSpec(
        name="set_item",
        description="Write a value.",
        parameters={
            "type": "object",
            "properties": {"key": {"type": "string"}, "value": {"type": "string"}},
            "required": ["key", "value"],
        },
    ),
    ToolSpec(name="crash_env", description="Simulates an infrastructure fault."),
]


class KVInstance:
    """A tiny in-memory EnvInstance: a key-value store with read and write tools."""

    def __init__(self, data: dict[str, str] | None = None) -> None:
        self.tool_specs = list(KV_TOOLS)
        self.data = dict(data or {"greeting": "hello"})
        self.log: list[tuple[str, dict[str, Any]]] = []
        self.closed = False

    async def call(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        start = time.perf_counter()
        self.log.append((name, arguments))
        if name == "crash_env":
            raise RuntimeError("worker died")
        if name == "get_item":
            key = arguments.get("key")
            if not isinstance(key, str) or key not in self.data:
                return ToolResult(tool=name, ok=False, error=f"no item {key!r}", error_kind="tool_error")
            return ToolResult(tool=name, ok=True, output={"key": key, "value": self.data[key]})
        if name == "set_item":
            key, value = arguments.get("key"), arguments.get("value")
            if not isinstance(key, str) or not isinstance(value, str):
                return ToolResult(tool=name, ok=False, error="key and value must be strings", writes=True)
            self.data[key] = value
            return ToolResult(
                tool=name,
                ok=True,
                output={"ok": True},
                writes=True,
                duration_us=(time.perf_counter() - start) * 1e6,
            )
        return ToolResult(tool=name, ok=False, error=f"unknown tool {name}", error_kind="unknown_tool")

    async def aclose(self) -> None:
        self.closed = True


@dataclass
class FakeTask:
    """The task fields the runner reads (the real `Task` has more)."""

    instruction: str = "Set colour to blue."
    id: str = "t1"
    env: str = "kv"
    mode: str = "autonomous"
    user: Any = None


def call_block(name: str, arguments: Any) -> str:
    """One Hermes tool-call block as the template writes it."""
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


@pytest.fixture
def fakes() -> SimpleNamespace:
    """The fakes of this package, as one namespace (importlib mode cannot import test modules)."""
    return SimpleNamespace(
        Model=ScriptedFakeChatModel,
        Instance=KVInstance,
        Task=FakeTask,
        call=call_block,
        render=render_chatml,
        codepoints=codepoints,
        ModelError=ModelError,
        ToolCall=ToolCall,
        Completion=Completion,
        END=END,
    )
