"""Episodes with a simulated user and a rubric judge: scripted fakes for the control flow.

The real-model path (a conversational EVALUATE on the embedded model) is in
tests/ops/test_conversational_eval.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from arena.env.loader import BUNDLED_ROOT, load_environment
from arena.episode.runner import EpisodeConfig
from arena.protocols import UserContext, UserTurn
from arena.tasks.model import AnswerCheck, RubricCheck, Task
from arena.tasks.reward import RewardConfig
from arena.types import Completion, Message, SamplingParams
from work.episode import EpisodeView, run_and_verify
from work.tasks import prepare_tasks

pytestmark = pytest.mark.anyio


def letters_task() -> Task:
    """A tool-less task of the library environment scored by the letters of its answer."""
    return Task(
        id="say-something",
        env="library",
        instruction="Say hello to me in one short sentence.",
        checks=[AnswerCheck(name=f"has {c}", contains=[c]) for c in "cdlmrsuwy"],
    )


def tiny_view() -> EpisodeView:
    """One short turn, compact prompt, no tools shown, rewarded by shaping."""
    return EpisodeView(
        episode=EpisodeConfig(
            max_turns=1,
            max_tokens_per_turn=12,
            max_total_tokens=512,
            params=SamplingParams(temperature=1.0, logprobs=True),
        ),
        reward=RewardConfig(shaping_only=True),
        system_prompt="compact",
        tool_subset=0,
    )


class ScriptedFakeChat:
    """Answers every request with the same text and records the requests."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.requests: list[list[Message]] = []

    async def chat(self, messages: list[Message], **_tools_and_params: object) -> Completion:
        self.requests.append(list(messages))
        return Completion(text=self.text)


class ScriptedFakeUser:
    """Says its intent once, then stops."""

    def __init__(self) -> None:
        self.turns = 0

    async def reply(self, context: UserContext, conversation: list[Message]) -> UserTurn:
        self.turns += 1
        if self.turns == 1:
            return UserTurn(content=context.intent)
        return UserTurn(content="Thanks!", stop=True)


VERDICT = json.dumps({"verdicts": [{"criterion": 1, "reason": "it greets", "passed": True}]})


async def _prepared(task):
    envs = {"library": load_environment(Path(BUNDLED_ROOT) / "library")}
    prepared, skipped = await prepare_tasks([task], envs, system_prompt="compact", tool_subset=0)
    assert not skipped
    return prepared[0]


async def test_a_rubric_check_is_graded_by_the_judge_given_and_fails_clearly_without_one() -> None:
    task = letters_task().model_copy(
        update={"checks": [RubricCheck(criteria=["The agent greets the user."])]}
    )
    item = await _prepared(task)
    policy = ScriptedFakeChat("Hello there, lovely to meet you!")
    _, without = await run_and_verify(policy, item, tiny_view())
    assert without.checks[0].detail == "no judge model configured" and not without.passed
    judge = ScriptedFakeChat(VERDICT)
    _, graded = await run_and_verify(policy, item, tiny_view(), judge=judge)
    assert graded.passed and graded.checks[0].detail == "all 1 criteria met"
    assert "Hello there, lovely to meet you!" in judge.requests[0][-1].content


async def test_a_conversational_task_needs_the_simulated_user_it_is_given() -> None:
    task = letters_task().model_copy(
        update={
            "mode": "conversational",
            "instruction": "Hi, I need some help.",
            "user": UserContext(intent="Say hello to me in one short sentence."),
        }
    )
    item = await _prepared(task)
    user = ScriptedFakeUser()
    transcript, _ = await run_and_verify(
        ScriptedFakeChat("Hello, what can I do?"), item, tiny_view(), user=user
    )
    assert user.turns >= 1
    said = [m.content for m in transcript.messages if m.role == "user"]
    assert said[:2] == ["Hi, I need some help.", "Say hello to me in one short sentence."]
