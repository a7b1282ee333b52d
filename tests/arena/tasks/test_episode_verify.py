"""Verifying a real episode: `run_episode` with a scripted fake policy on the bank, then `verify`."""

from __future__ import annotations

import json

import pytest

from arena.episode.runner import run_episode
from arena.tasks.transcript import TranscriptLike
from arena.tasks.verify import verify
from arena.types import Completion, Message, SamplingParams, ToolSpec

pytestmark = pytest.mark.anyio


class ScriptedFakePolicy:
    """A fake policy that replays scripted assistant texts (Hermes tool-call format)."""

    name = "scripted-fake-policy"

    def __init__(self, texts: list[str]) -> None:
        self.texts = list(texts)

    async def chat(
        self,
        messages: list[Message],
        *,
        tools: list[ToolSpec] | None = None,
        params: SamplingParams | None = None,
    ) -> Completion:
        return Completion(text=self.texts.pop(0))


def call(name: str, arguments: dict) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


async def test_real_transcript_is_verified(bank_env, bank_tasks) -> None:
    task = bank_tasks["move-100-to-savings"]
    policy = ScriptedFakePolicy(
        [
            call("list_accounts", {}),
            "<tool_call>{not json</tool_call>",  # malformed: costs the penalty, nothing else
            call("transfer", {"from_account": "ACC-1", "to_account": "ACC-2", "amount": 100}),
            "I moved $100.00 from checking to savings.",
        ]
    )
    instance = bank_env.new_instance()
    try:
        transcript = await run_episode(policy, instance, task)
        assert isinstance(transcript, TranscriptLike)
        assert transcript.malformed_calls == 1
        verdict = await verify(task, instance, transcript, env=bank_env)
    finally:
        await instance.aclose()
    assert all(c.passed for c in verdict.checks), verdict.checks
    assert verdict.reward == pytest.approx(0.9) and not verdict.passed
