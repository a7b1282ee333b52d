"""Token chains: an episode's policy turns as one token sequence, each turn extending the last.

A chat endpoint (or a local model rendering the whole conversation each turn) re-renders every
earlier turn, and any re-rendering that differs from what was sampled (Qwen3's template drops the
empty `<think>` block of earlier turns, tool-call JSON is re-serialized, BPE merges across the old
boundary) starts a new token chain, of which the trainer can only train the first. Inside a
`token_session` (one per episode: `work.episode.run_and_verify` opens it), a policy that renders
its own prompts — `simulate.token_chat.TokenChatModel` over HTTP, `simulate.local.LocalChatModel`
in process — builds each turn's prompt with `chained_prompt`:

- the first turn renders the conversation with the generation prompt and tokenizes it;
- every later turn is the previous prompt's ids, the ids sampled (exactly as they were), the
  end-of-turn token when the completion did not end on one, then only the new messages (tool
  results, the user's reply) rendered as the template renders them after an assistant turn
  (`ChatRenderer.delta`). Earlier ids are never re-tokenized, so each turn extends the chain.

A request that does not extend the session's last one (a truncated history window, a call outside
a session) is rendered whole — the episode's `TokenRecorder` then reports the chain break. The SFT
warm-up renders its reference conversations the same way, so it trains each turn in the context
GRPO samples it in.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from arena.protocols import ModelError
from arena.types import Message, ToolSpec
from simulate.chat_format import DEFAULT_TEMPLATE_KWARGS, render_chat, visible_text
from simulate.model_errors import ModelRequestError

SENTINEL = "ARENA-TURN-BOUNDARY-7f3a"
# End-of-turn tokens of common chat templates, besides the tokenizer's own EOS.
END_MARKERS = ("<|im_end|>", "<|eot_id|>", "<end_of_turn>", "<|end|>")


@dataclass
class TokenSession:
    """One episode's chain: the ids of its last request and completion, and what that request was."""

    key: str = ""  # fingerprint of the last request's messages and tools
    messages: int = 0  # how many messages that request had
    ids: list[int] = field(default_factory=list)  # its prompt ids + the sampled ids
    turns: int = 0
    rerendered: int = 0  # requests that could not extend the chain (rendered whole)
    pending: tuple[str, int] = ("", 0)  # the request in flight: its fingerprint and length


_session: contextvars.ContextVar[TokenSession | None] = contextvars.ContextVar("token_session", default=None)


@contextlib.contextmanager
def token_session() -> Iterator[TokenSession]:
    """A fresh chain for the policy calls made inside the block (and the tasks it starts)."""
    session = TokenSession()
    token = _session.set(session)
    try:
        yield session
    finally:
        _session.reset(token)


def _fingerprint(messages: Sequence[Message], tools: Sequence[ToolSpec] | None) -> str:
    data = [[m.openai() for m in messages], [t.openai() for t in tools or []]]
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()


class ChatRenderer:
    """The policy's chat template, client-side: whole prompts and the ids new messages add."""

    def __init__(self, tokenizer: Any, *, template_kwargs: Mapping[str, Any] | None = None) -> None:
        self.tokenizer = tokenizer
        self.template_kwargs = dict(DEFAULT_TEMPLATE_KWARGS if template_kwargs is None else template_kwargs)
        vocab = tokenizer.get_vocab()
        markers = [tokenizer.eos_token, *END_MARKERS]
        self.end_markers = [m for m in dict.fromkeys(markers) if m and m in vocab]
        if not self.end_markers:
            raise ModelError("the policy's tokenizer names no end-of-turn token")
        self.end_ids = {int(vocab[m]) for m in self.end_markers}

    def render(self, messages: Sequence[dict[str, Any]], tools: Sequence[ToolSpec] | None, **kw: Any) -> str:
        """The template's text for `messages` (`kw`: `add_generation_prompt`)."""
        openai_tools = [t.openai() for t in tools] if tools else None
        return render_chat(
            self.tokenizer,
            messages,
            openai_tools,
            self.template_kwargs,
            add_generation_prompt=bool(kw.get("add_generation_prompt", False)),
        )

    def encode(self, text: str) -> list[int]:
        """Ids of rendered text (the template wrote any BOS itself)."""
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def prompt(self, messages: Sequence[Message], tools: Sequence[ToolSpec] | None) -> list[int]:
        """A whole prompt: the conversation and the generation prompt."""
        return self.encode(self.render([m.openai() for m in messages], tools, add_generation_prompt=True))

    def delta(self, new: Sequence[Message], tools: Sequence[ToolSpec] | None) -> list[int]:
        """What the template writes after a closed assistant turn for `new`, then the generation prompt.

        Rendered behind a stand-in user and assistant turn, so that templates which need a user
        query (Qwen3) or group consecutive tool results see the context they expect; the text
        after the stand-in turn's end-of-turn marker is the part that `new` adds.
        """
        stand_in = [{"role": "user", "content": "."}, {"role": "assistant", "content": SENTINEL}]
        text = self.render([*stand_in, *(m.openai() for m in new)], tools, add_generation_prompt=True)
        at = text.find(SENTINEL)
        ends = [(text.find(m, at), m) for m in self.end_markers]
        found = [(i, m) for i, m in ends if i >= 0]
        if at < 0 or not found:
            raise ModelRequestError("the chat template did not close the assistant turn with a known marker")
        end, marker = min(found)
        return self.encode(text[end + len(marker) :])

    def close(self, completion_ids: Sequence[int]) -> list[int]:
        """The end-of-turn ids a completion needs before the next message (none if it ended on one)."""
        if completion_ids and completion_ids[-1] in self.end_ids:
            return []
        return self.encode(self.end_markers[0])

    def visible_text(self, text: str) -> str:
        """The completion's text as the episode sees it: reasoning cut when thinking is on."""
        return visible_text(text, self.template_kwargs)


def current_session() -> TokenSession | None:
    """The token session of the running episode, if any."""
    return _session.get()


def chained_prompt(
    renderer: ChatRenderer, messages: Sequence[Message], tools: Sequence[ToolSpec] | None
) -> list[int]:
    """This turn's prompt ids: the session's chain extended by the new messages, or the whole conversation."""
    session = _session.get()
    if session is not None and session.ids and _continues(session, messages, tools):
        closing = renderer.close(session.ids)
        return [*session.ids, *closing, *renderer.delta(messages[session.messages + 1 :], tools)]
    if session is not None and session.ids:
        session.rerendered += 1
    return renderer.prompt(messages, tools)


def _continues(session: TokenSession, messages: Sequence[Message], tools: Sequence[ToolSpec] | None) -> bool:
    n = session.messages
    return (
        len(messages) > n + 1
        and messages[n].role == "assistant"
        and _fingerprint(messages[:n], tools) == session.key
    )


def begin_turn(messages: Sequence[Message], tools: Sequence[ToolSpec] | None) -> None:
    """Note the request a turn is made of, for `end_turn` (its answer may come in another call)."""
    session = _session.get()
    if session is not None:
        session.pending = (_fingerprint(messages, tools), len(messages))


def end_turn(prompt_ids: Sequence[int], completion_ids: Sequence[int]) -> None:
    """The turn `begin_turn` noted was answered: its prompt and sampled ids are the chain now."""
    session = _session.get()
    if session is not None:
        session.key, session.messages = session.pending
        session.ids = [*prompt_ids, *completion_ids]
        session.turns += 1
