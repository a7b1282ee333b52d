"""Token-exact rollouts over HTTP: token ids in, token ids and log-probs out (`TokenChatModel`).

A chat endpoint re-renders the whole conversation every turn, and any re-rendering that differs
from what was sampled (Qwen3's template drops the empty `<think>` block of earlier turns, tool-call
JSON is re-serialized, BPE merges across the old boundary) starts a new token chain, of which the
trainer can only train the first. So the policy server is driven through its completions endpoint
(vLLM's `/v1/completions` with `return_token_ids`, or `arena serve-model`'s) and the prompt is
rendered here, by the policy's own chat template:

- the first turn renders the conversation with the generation prompt and tokenizes it;
- every later turn of the same episode sends the previous prompt's ids, the ids the server
  sampled (exactly as returned), the end-of-turn token when the completion did not end on one,
  then only the new messages (tool results, the user's reply) rendered as the template renders
  them after an assistant turn (`ChatRenderer.delta`). Earlier ids are never re-tokenized, so
  each turn extends the same chain by construction.

Which earlier turn a request continues is kept per episode in a context variable
(`token_session`): the rollout bridge opens one session per episode task. A request that does
not extend the session's last one (a truncated history window, a call outside a session) is
rendered whole — the episode's `TokenRecorder` then reports the chain break.

Thinking (Qwen3): off by default — the template is rendered with `enable_thinking=False`, which
puts an empty `<think></think>` block in the generation prompt; it stays in the chain as context
(never trained) and the policy answers directly. With `enable_thinking=True` the sampled reasoning
stays in the chain exactly as sampled and is trained like every sampled token; it is cut from the
text the episode sees, so tool calls and answers are parsed from what follows it. Templates
without a thinking switch ignore the flag.

Every sampler field vLLM would otherwise take from the model's `generation_config.json` (Qwen3:
top_k 20) is sent with each request (`pinned_sampling`): the tokens are then drawn from the
temperature-scaled softmax the trainer scores, not from a truncation it never sees.

Constrained decoding cannot go through this endpoint: a request asking for a JSON schema or a
required tool call is refused rather than silently sampled unconstrained.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from arena.protocols import ModelError
from arena.types import Completion, Message, SamplingParams, ToolSpec, Usage
from simulate.http import _FINISH, HttpChatModel, _int_list, _logprobs, pinned_sampling
from simulate.model_errors import ModelRequestError

SENTINEL = "ARENA-TURN-BOUNDARY-7f3a"
# End-of-turn tokens of common chat templates, besides the tokenizer's own EOS.
END_MARKERS = ("<|im_end|>", "<|eot_id|>", "<end_of_turn>", "<|end|>")
_THINK = re.compile(r"^\s*<think>.*?</think>\s*", re.DOTALL)


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

    def __init__(self, tokenizer: Any, *, enable_thinking: bool = False) -> None:
        self.tokenizer = tokenizer
        self.enable_thinking = enable_thinking
        vocab = tokenizer.get_vocab()
        markers = [tokenizer.eos_token, *END_MARKERS]
        self.end_markers = [m for m in dict.fromkeys(markers) if m and m in vocab]
        if not self.end_markers:
            raise ModelError("the policy's tokenizer names no end-of-turn token")
        self.end_ids = {int(vocab[m]) for m in self.end_markers}

    def render(self, messages: Sequence[dict[str, Any]], tools: Sequence[ToolSpec] | None, **kw: Any) -> str:
        """The template's text for `messages` (`kw`: `add_generation_prompt`)."""
        try:
            return str(
                self.tokenizer.apply_chat_template(
                    list(messages),
                    tools=[t.openai() for t in tools] if tools else None,
                    tokenize=False,
                    enable_thinking=self.enable_thinking,
                    **kw,
                )
            )
        except Exception as exc:  # jinja errors: the template rejects this conversation
            raise ModelRequestError(f"the chat template cannot render these messages: {exc}") from exc

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
        return _THINK.sub("", text, count=1) if self.enable_thinking else text


class TokenChatModel(HttpChatModel):
    """A `ChatModel` over an OpenAI-compatible completions endpoint, driven with token ids."""

    backend = "http-tokens"
    endpoint = "/completions"

    def __init__(
        self,
        base_url: str | Sequence[str],
        model: str,
        tokenizer: Any,
        *,
        enable_thinking: bool = False,
        **kwargs: Any,
    ) -> None:
        # Several base URLs: the policy's replicas, spread and failed over like chat requests
        # (`simulate.replicas`); each request is whole, so any replica can continue a chain.
        super().__init__(base_url, model, return_token_ids=True, **kwargs)
        self.renderer = ChatRenderer(tokenizer, enable_thinking=enable_thinking)
        # The model name requests carry when it is not `name` (a LoRA adapter served under its own
        # name); `name` stays the metrics label, so a new adapter each step adds no label value.
        self.request_model: str | None = None

    def prompt_ids(self, messages: list[Message], tools: list[ToolSpec] | None) -> list[int]:
        """The prompt for this request: the session's chain extended, or the whole conversation."""
        session = _session.get()
        if session is not None and session.ids and self._continues(session, messages, tools):
            closing = self.renderer.close(session.ids)
            return [*session.ids, *closing, *self.renderer.delta(messages[session.messages + 1 :], tools)]
        if session is not None and session.ids:
            session.rerendered += 1
        return self.renderer.prompt(messages, tools)

    @staticmethod
    def _continues(session: TokenSession, messages: list[Message], tools: list[ToolSpec] | None) -> bool:
        n = session.messages
        return (
            len(messages) > n + 1
            and messages[n].role == "assistant"
            and _fingerprint(messages[:n], tools) == session.key
        )

    def request_body(
        self, messages: list[Message], tools: list[ToolSpec] | None, params: SamplingParams
    ) -> dict[str, Any]:
        """A completions request over the prompt's ids (the server applies no template)."""
        if params.json_schema is not None or params.require_tool_call:
            raise ModelRequestError(
                "the token-id completions path samples without a grammar: json_schema and "
                "require_tool_call cannot be honoured"
            )
        session = _session.get()
        if session is not None:
            session.pending = (_fingerprint(messages, tools), len(messages))
        body: dict[str, Any] = {
            "model": self.request_model or self.name,
            "prompt": self.prompt_ids(messages, tools),
            **pinned_sampling(params),
            "return_token_ids": True,
        }
        if params.stop:
            body["stop"] = params.stop
        if params.seed is not None:
            body["seed"] = params.seed
        if params.logprobs:
            body["logprobs"] = 0  # the sampled tokens' own log-probs
        body.update(self._extra_body)
        return body

    def parse_response(self, data: Any) -> Completion:
        """A `text_completion` answer with its prompt and completion ids."""
        if not isinstance(data, dict) or not isinstance(data.get("choices"), list) or not data["choices"]:
            raise ModelError(f"the server's answer has no choices: {str(data)[:200]}")
        choice = data["choices"][0]
        completion_ids = _int_list(choice.get("token_ids"))
        prompt_ids = _int_list(choice.get("prompt_token_ids") or data.get("prompt_token_ids"))
        if completion_ids is None or prompt_ids is None:
            raise ModelError(
                f"{self.name}'s server returned no token ids: is it vLLM with return_token_ids support?"
            )
        session = _session.get()
        if session is not None:  # the chain the session's next request extends
            session.key, session.messages = session.pending
            session.ids = [*prompt_ids, *completion_ids]
            session.turns += 1
        usage = data.get("usage") or {}
        return Completion(
            text=self.renderer.visible_text(str(choice.get("text") or "")),
            finish_reason=_FINISH.get(str(choice.get("finish_reason") or "stop"), "stop"),
            prompt_token_ids=prompt_ids,
            completion_token_ids=completion_ids,
            completion_logprobs=_logprobs(choice),
            usage=Usage(
                prompt_tokens=int(usage.get("prompt_tokens") or len(prompt_ids)),
                completion_tokens=int(usage.get("completion_tokens") or len(completion_ids)),
            ),
            model=str(data.get("model") or self.name),
        )
