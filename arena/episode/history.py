"""What the policy sees of the conversation so far: the one history function.

AWM's lesson: a policy trained on one history layout and evaluated on another loses much of what
it learnt. So every policy call, in training and in evaluation, goes through `policy_view`; an
optional window keeps only the last N turns (plus the system prompt and the task), and the same
window must be configured for both.

Assistant messages in a transcript keep the model's raw text (tool-call blocks included) *and*
the parsed calls, so verifiers and judges read structured calls while the policy gets back
exactly the text it wrote; `policy_view` drops the parsed copy where the raw text already holds
the calls, otherwise a chat template would render them twice.
"""

from __future__ import annotations

from arena.episode.parser import OPEN_TAG
from arena.types import Message


def for_policy(message: Message) -> Message:
    """The form of one message the policy is shown."""
    if message.role == "assistant" and message.tool_calls and OPEN_TAG in message.content:
        return message.model_copy(update={"tool_calls": []})
    return message


def policy_view(messages: list[Message], keep_last_turns: int | None = None) -> list[Message]:
    """The messages for the next policy call.

    The head (system prompts and everything up to and including the first user message, i.e. the
    task) is always kept. After it, a turn starts at each assistant message and runs through the
    observations and user messages that follow it; with `keep_last_turns=N` only the last N turns
    are kept. `None` keeps everything.
    """
    if keep_last_turns is not None and keep_last_turns < 0:
        raise ValueError("keep_last_turns must be >= 0 or None")
    head_end = 0
    for i, m in enumerate(messages):
        if m.role == "user":
            head_end = i + 1
            break
        if m.role == "assistant":
            head_end = i
            break
    else:
        head_end = len(messages)
    head = messages[:head_end]
    rest = messages[head_end:]
    if keep_last_turns is not None:
        starts = [i for i, m in enumerate(rest) if m.role == "assistant"]
        if len(starts) > keep_last_turns:
            cut = starts[len(starts) - keep_last_turns] if keep_last_turns > 0 else len(rest)
            # Observations that arrived after the last kept assistant message are the newest input:
            # with a zero window they are all the policy sees of the episode after the task.
            if keep_last_turns == 0:
                cut = starts[-1] + 1 if starts else 0
            rest = rest[cut:]
    return [for_policy(m) for m in head + rest]


def is_truncated(messages: list[Message], view: list[Message]) -> bool:
    """Whether `view` dropped messages of `messages` (the history window cut something)."""
    return len(view) < len(messages)
