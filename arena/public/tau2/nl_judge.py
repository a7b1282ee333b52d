"""τ²'s natural-language assertions judged on a played conversation, one verdict per assertion.

τ² asks an LLM whether the agent met each expected outcome, given the conversation. Arena asks its
helper judge with its own rubric prompt (`arena.tasks.judge`): the transcript is fenced and
rendered with the agent's and the user's words quoted, and every assertion is a numbered
criterion. As in τ², the judge does not see the user's hidden scenario, only the conversation.
"""

from __future__ import annotations

from arena.protocols import ChatModel
from arena.tasks.judge import judge_messages, judge_verdicts
from arena.tasks.transcript import ReplayTranscript, render_transcript
from arena.types import Message

# What the rubric prompt shows as the user's goal: τ²'s judge grades from the conversation alone.
GOAL = "(not shown: grade each expected outcome from the conversation alone)"
# τ² conversations are long (dozens of messages); keep most of one for the judge.
MAX_CHARS = 24000
PER_MESSAGE = 2000


def transcript_text(messages: list[Message]) -> str:
    """The conversation as the judge reads it."""
    return render_transcript(
        ReplayTranscript(messages=messages), max_chars=MAX_CHARS, per_message=PER_MESSAGE
    )


async def judge_assertions(
    judge: ChatModel | None, messages: list[Message], assertions: list[str], *, attempts: int = 3
) -> tuple[list[bool] | None, str]:
    """A verdict per assertion, with a note; None when there is no judge.

    An answer that never validates (after `attempts`) fails every assertion, as a rubric check
    fails when its judge gives no verdict.
    """
    if judge is None:
        return None, "no judge: NL assertions not checked"
    n = len(assertions)
    prompt = judge_messages(GOAL, transcript_text(messages), assertions)
    out, problem = await judge_verdicts(judge, prompt, n, attempts=attempts, label="tau2_nl_assertions")
    if out is None:
        return [False] * n, problem
    failed = [
        f"not met: {assertions[v.criterion - 1]} ({v.reason.strip()})" for v in out.verdicts if not v.passed
    ]
    return [v.passed for v in out.verdicts], "; ".join(failed) or f"all {n} assertions met"
