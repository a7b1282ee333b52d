"""Fixtures of the synthesis tests: bundled environments, the asyncio backend, the local model."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from arena.env.registry import bundled_env_dirs, load_environment
from arena.types import Completion, Message, SamplingParams, ToolSpec, Usage


@pytest.fixture
def anyio_backend() -> str:
    """Synthesis runs on asyncio (the sandbox pool and the model backends need it)."""
    return "asyncio"


@pytest.fixture(scope="session")
def bundled_envs() -> dict:
    """Every bundled environment, loaded once."""
    return {env.name: env for env in (load_environment(d) for d in bundled_env_dirs())}


@pytest.fixture(scope="session")
def helper_model(embedded_model_path: Path):  # -> simulate.local.LocalChatModel
    """The embedded model as the helper (loaded once per session)."""
    from simulate.local import LocalChatModel

    return LocalChatModel.load(embedded_model_path, device="cpu", max_batch=8)


class ScriptedFakeHelper:
    """A `ChatModel` that answers from a script: a list of replies, or a function of the conversation.

    Records every prompt it saw; repeats the last reply when the list runs out.
    """

    name = "scripted-fake-helper"

    def __init__(self, replies: list[str] | Callable[[list[Message]], str]) -> None:
        self.replies = replies
        self.prompts: list[str] = []

    async def chat(
        self,
        messages: list[Message],
        *,
        tools: list[ToolSpec] | None = None,
        params: SamplingParams | None = None,
    ) -> Completion:
        prompt = messages[-1].content
        self.prompts.append(prompt)
        if callable(self.replies):
            text = self.replies(messages)
        else:
            text = self.replies[min(len(self.prompts) - 1, len(self.replies) - 1)]
        return Completion(
            text=text, usage=Usage(prompt_tokens=len(prompt) // 4, completion_tokens=len(text) // 4)
        )


@pytest.fixture
def scripted_helper() -> type[ScriptedFakeHelper]:
    """The scripted fake helper class (tests build one with their own script)."""
    return ScriptedFakeHelper
