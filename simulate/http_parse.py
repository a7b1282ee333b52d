"""Reading an OpenAI-compatible answer: a chat completion body into a `Completion`, leniently.

Field-name variants of vLLM and other servers are accepted (token ids under `token_ids`,
`completion_token_ids` or `output_token_ids`; log-probs in the chat or the legacy completions
shape); a native tool call that does not fit `ToolCall` goes back into the text as a Hermes block,
so the episode runner reports it as malformed rather than losing it.
"""

from __future__ import annotations

import json
from typing import Any

from arena.episode.parser import call_block
from arena.protocols import ModelError
from arena.types import Completion, FinishReason, ToolCall, Usage

# A server's finish reason → ours.
FINISH_REASONS: dict[str, FinishReason] = {
    "stop": "stop",
    "eos": "stop",
    "length": "length",
    "max_tokens": "length",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "content_filter": "error",
    "error": "error",
}


def int_list(value: Any) -> list[int] | None:
    """`value` if it is a list of token ids, else None."""
    if isinstance(value, list) and all(isinstance(v, int) for v in value):
        return list(value)
    return None


def _first(mapping: dict[str, Any], *keys: str) -> Any:
    for key in keys:
        if mapping.get(key) is not None:
            return mapping[key]
    return None


def choice_logprobs(choice: dict[str, Any]) -> list[float] | None:
    """The sampled tokens' log-probs of one choice (chat or legacy completions shape), if any."""
    raw = choice.get("logprobs")
    if isinstance(raw, dict):
        content = raw.get("content")
        if isinstance(content, list):
            return [float(e["logprob"]) for e in content if isinstance(e, dict) and "logprob" in e]
        tokens = raw.get("token_logprobs")
        if isinstance(tokens, list):
            return [float(v) for v in tokens]
    if isinstance(raw, list) and all(isinstance(v, int | float) for v in raw):
        return [float(v) for v in raw]
    return None


def _hermes_block(name: str, arguments: Any) -> str:
    args = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
    return call_block(name, args)


def _tool_calls(message: dict[str, Any]) -> tuple[list[ToolCall], list[str]]:
    """Native tool calls, and their Hermes text if any of them cannot be represented as `ToolCall`."""
    calls: list[ToolCall] = []
    blocks: list[str] = []
    broken = False
    for i, raw in enumerate(message.get("tool_calls") or []):
        if not isinstance(raw, dict):
            broken = True
            continue
        function = raw.get("function") if isinstance(raw.get("function"), dict) else raw
        name = str(function.get("name") or "")
        arguments = function.get("arguments", {})
        blocks.append(_hermes_block(name, arguments if arguments is not None else {}))
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments) if arguments.strip() else {}
            except ValueError:
                broken = True
                continue
        if not isinstance(arguments, dict) or not name:
            broken = True
            continue
        calls.append(ToolCall(id=str(raw.get("id") or f"call_{i}"), name=name, arguments=arguments))
    # A call that does not fit `ToolCall` goes back to the text as a Hermes block, so the episode
    # runner's parser reports it as malformed instead of it silently disappearing.
    return (calls, []) if not broken else ([], blocks)


def parse_chat_response(data: Any, *, model: str = "") -> Completion:
    """Turn an OpenAI-style chat completion body into a `Completion` (lenient about extensions)."""
    if not isinstance(data, dict) or not isinstance(data.get("choices"), list) or not data["choices"]:
        raise ModelError(f"the server's answer has no choices: {str(data)[:200]}")
    choice = data["choices"][0]
    message = choice.get("message") or {}
    text = message.get("content") or ""
    if not isinstance(text, str):  # content parts
        text = "".join(p.get("text", "") for p in text if isinstance(p, dict))
    calls, blocks = _tool_calls(message)
    if blocks:
        text = "\n".join([text, *blocks]) if text else "\n".join(blocks)
    finish = FINISH_REASONS.get(str(choice.get("finish_reason") or "stop"), "stop")
    if finish == "tool_calls" and not calls:
        finish = "stop"
    prompt_ids = int_list(_first(data, "prompt_token_ids") or _first(choice, "prompt_token_ids"))
    completion_ids = int_list(
        _first(choice, "token_ids", "completion_token_ids", "output_token_ids")
        or _first(message, "token_ids", "completion_token_ids")
    )
    usage_raw = data.get("usage") or {}
    usage = Usage(
        prompt_tokens=int(usage_raw.get("prompt_tokens") or (len(prompt_ids) if prompt_ids else 0)),
        completion_tokens=int(
            usage_raw.get("completion_tokens") or (len(completion_ids) if completion_ids else 0)
        ),
    )
    return Completion(
        text=text,
        tool_calls=calls,
        finish_reason=finish,
        prompt_token_ids=prompt_ids,
        completion_token_ids=completion_ids,
        completion_logprobs=choice_logprobs(choice),
        usage=usage,
        model=str(data.get("model") or model),
    )
