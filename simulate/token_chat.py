"""Token-exact rollouts over HTTP: token ids in, token ids and log-probs out (`TokenChatModel`).

The policy server is driven through its completions endpoint (vLLM's `/v1/completions` with
`return_token_ids`, or `arena serve-model`'s) and the prompt is rendered here, by the policy's own
chat template and chat-template arguments (`simulate.chat_format`), each turn extending the
episode's token chain (`simulate.token_chain`): the server applies no template, so nothing it
renders can break the chain. Which earlier turn a request continues is kept per episode in a
context variable (`token_session`).

Thinking (Qwen3) is off by default: `enable_thinking=False` puts an empty `<think></think>` block in
the generation prompt; it stays in the chain as context (never trained) and the policy answers
directly. With `enable_thinking=True` the sampled reasoning stays in the chain exactly as sampled
and is trained like every sampled token; it is cut from the text the episode sees, so tool calls
and answers are parsed from what follows it. Templates without a thinking switch ignore the flag.

Every sampler field vLLM would otherwise take from the model's `generation_config.json` (Qwen3:
top_k 20) is sent with each request (`pinned_sampling`): the tokens are then drawn from the
temperature-scaled softmax the trainer scores, not from a truncation it never sees.

Constrained decoding cannot go through this endpoint: a request asking for a JSON schema or a
required tool call is refused rather than silently sampled unconstrained.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from arena.protocols import ModelError
from arena.types import Completion, Message, SamplingParams, ToolSpec, Usage
from simulate.http import HttpChatModel, pinned_sampling
from simulate.http_parse import FINISH_REASONS, choice_logprobs, int_list
from simulate.model_errors import ModelRequestError
from simulate.token_chain import ChatRenderer, begin_turn, chained_prompt, end_turn


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
        chat_template_kwargs: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        # Several base URLs: the policy's replicas, spread and failed over like chat requests
        # (`simulate.replicas`); each request is whole, so any replica can continue a chain.
        super().__init__(base_url, model, return_token_ids=True, **kwargs)
        self.renderer = ChatRenderer(tokenizer, template_kwargs=chat_template_kwargs)
        # The model name requests carry when it is not `name` (a LoRA adapter served under its own
        # name); `name` stays the metrics label, so a new adapter each step adds no label value.
        self.request_model: str | None = None

    def prompt_ids(self, messages: list[Message], tools: list[ToolSpec] | None) -> list[int]:
        """The prompt for this request: the session's chain extended, or the whole conversation."""
        return chained_prompt(self.renderer, messages, tools)

    def request_body(
        self, messages: list[Message], tools: list[ToolSpec] | None, params: SamplingParams
    ) -> dict[str, Any]:
        """A completions request over the prompt's ids (the server applies no template)."""
        if params.json_schema is not None or params.require_tool_call:
            raise ModelRequestError(
                "the token-id completions path samples without a grammar: json_schema and "
                "require_tool_call cannot be honoured"
            )
        begin_turn(messages, tools)
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
        completion_ids = int_list(choice.get("token_ids"))
        prompt_ids = int_list(choice.get("prompt_token_ids") or data.get("prompt_token_ids"))
        if completion_ids is None or prompt_ids is None:
            raise ModelError(
                f"{self.name}'s server returned no token ids: is it vLLM with return_token_ids support?"
            )
        end_turn(prompt_ids, completion_ids)  # the chain the session's next request extends
        usage = data.get("usage") or {}
        return Completion(
            text=self.renderer.visible_text(str(choice.get("text") or "")),
            finish_reason=FINISH_REASONS.get(str(choice.get("finish_reason") or "stop"), "stop"),
            prompt_token_ids=prompt_ids,
            completion_token_ids=completion_ids,
            completion_logprobs=choice_logprobs(choice),
            usage=Usage(
                prompt_tokens=int(usage.get("prompt_tokens") or len(prompt_ids)),
                completion_tokens=int(usage.get("completion_tokens") or len(completion_ids)),
            ),
            model=str(data.get("model") or self.name),
        )
