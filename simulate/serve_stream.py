"""What the model server's chat and completion answers are made of, whole or streamed as SSE chunks.

`ChoiceParts` is one finished chat choice (content, native tool calls, token ids, logprobs);
`chat_message_choice` renders it for a plain answer and `chat_chunk_choices` for a stream, in the
chunk format OpenAI's `chat.completion.chunk` uses: a role delta, content deltas, tool-call deltas
(a header with id, type and name, then argument fragments, each tagged with the call's `index`),
and a last delta with the `finish_reason`.

Plain content streams one chunk per token, each carrying that token's id and logprob when asked:
`token_pieces` splits the text along the tokens, holding a multi-byte character back until the
token that completes it. The local backend returns a completion whole, so a stream's chunks are
all sent once the row has finished decoding; what a client sees is the same format and the same
text, ids and logprobs as the plain answer.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

DONE = "data: [DONE]\n\n"
# Argument fragments per streamed delta, in characters: a client must concatenate them either way.
ARGUMENT_FRAGMENT = 16


def sse(payload: Any) -> str:
    """One server-sent event carrying `payload` as JSON."""
    return f"data: {json.dumps(payload, ensure_ascii=False)}\n\n"


def token_pieces(tokenizer: Any, token_ids: Sequence[int], text: str) -> list[str] | None:
    """Each token's share of `text`, in order; the pieces join to exactly `text`.

    A token that ends inside a multi-byte character gets "" and the character goes with the token
    that completes it; special tokens and tokens past a stop-string cut get "". None when the
    tokens do not decode to `text` piece by piece (no tokenizer, or one that rewrites spaces when
    decoding a whole sequence), so the caller sends the text as one piece.
    """
    if tokenizer is None or not token_ids:
        return None
    pieces: list[str] = []
    # Decoding restarts one emitted token back (`prefix`) because sentencepiece tokenizers drop a
    # word's leading space when a sequence starts with it; `read` is the first token not yet emitted.
    prefix = read = 0
    for k in range(len(token_ids)):
        before = tokenizer.decode(token_ids[prefix:read], skip_special_tokens=True)
        after = tokenizer.decode(token_ids[prefix : k + 1], skip_special_tokens=True)
        if len(after) > len(before) and not after.endswith("\ufffd") and after.startswith(before):
            pieces.append(after[len(before) :])
            prefix, read = read, k + 1
        else:
            pieces.append("")
    clipped: list[str] = []
    used = 0
    for piece in pieces:
        piece = piece[: max(0, len(text) - used)]
        clipped.append(piece)
        used += len(piece)
    return clipped if "".join(clipped) == text else None


def text_spans(pieces: Sequence[str]) -> tuple[list[tuple[str, int, int]], int]:
    """Streamed text pieces as `(text, first token, end token)`, and the first token left over.

    Tokens with no text of their own (a held-back byte, a stop token) ride with the next piece;
    those after the last piece are left for the finishing chunk.
    """
    spans: list[tuple[str, int, int]] = []
    start = 0
    for k, piece in enumerate(pieces):
        if piece:
            spans.append((piece, start, k + 1))
            start = k + 1
    return spans, start


def token_strings(tokenizer: Any, token_ids: Sequence[int]) -> list[str]:
    """Each token decoded alone (special tokens as their text), for logprob entries."""
    if tokenizer is None:
        return [str(t) for t in token_ids]
    return [tokenizer.decode([t]) for t in token_ids]


@dataclass
class ChoiceParts:
    """One finished chat choice, before it is written as a message or as stream chunks."""

    index: int
    content: str | None
    finish_reason: str
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    token_ids: list[int] = field(default_factory=list)
    # Logprobs of `token_ids` (None when not asked for or not returned by the backend).
    logprobs: list[float] | None = None
    # Whether `content` is the whole completion text, so it can be streamed along the tokens.
    content_is_text: bool = True


def _logprob_entries(tokens: Sequence[str], logprobs: Sequence[float]) -> list[dict[str, Any]]:
    return [
        {"token": tok, "logprob": lp, "bytes": list(tok.encode()), "top_logprobs": []}
        for tok, lp in zip(tokens, logprobs, strict=False)
    ]


def chat_message_choice(parts: ChoiceParts, tokenizer: Any, *, token_ids: bool) -> dict[str, Any]:
    """`parts` as one choice of a `chat.completion`."""
    message: dict[str, Any] = {"role": "assistant", "content": parts.content}
    if parts.tool_calls:
        message["tool_calls"] = parts.tool_calls
    choice: dict[str, Any] = {
        "index": parts.index,
        "message": message,
        "finish_reason": parts.finish_reason,
        "logprobs": None,
    }
    if parts.logprobs is not None:
        tokens = token_strings(tokenizer, parts.token_ids)
        choice["logprobs"] = {"content": _logprob_entries(tokens, parts.logprobs)}
    if token_ids:
        choice["token_ids"] = parts.token_ids
    return choice


def chat_chunk_choices(parts: ChoiceParts, tokenizer: Any, *, token_ids: bool) -> Iterator[dict[str, Any]]:
    """`parts` as the successive choice objects of `chat.completion.chunk`s."""
    tokens = token_strings(tokenizer, parts.token_ids) if parts.logprobs is not None else []

    def chunk(
        delta: dict[str, Any], first: int = 0, end: int = 0, finish: str | None = None
    ) -> dict[str, Any]:
        choice: dict[str, Any] = {
            "index": parts.index,
            "delta": delta,
            "logprobs": None,
            "finish_reason": finish,
        }
        if parts.logprobs is not None:
            choice["logprobs"] = {"content": _logprob_entries(tokens[first:end], parts.logprobs[first:end])}
        if token_ids:
            choice["token_ids"] = parts.token_ids[first:end]
        return choice

    yield chunk({"role": "assistant", "content": ""})
    left = 0  # the first token not yet sent
    pieces = None
    if parts.content and parts.content_is_text:
        pieces = token_pieces(tokenizer, parts.token_ids, parts.content)
    if pieces is not None:
        spans, left = text_spans(pieces)
        for text, first, end in spans:
            yield chunk({"content": text}, first, end)
    elif parts.content:
        yield chunk({"content": parts.content})
    for i, call in enumerate(parts.tool_calls):
        function = call["function"]
        header = {"index": i, "id": call["id"], "type": "function"}
        yield chunk({"tool_calls": [{**header, "function": {"name": function["name"], "arguments": ""}}]})
        arguments = function["arguments"]
        for at in range(0, len(arguments), ARGUMENT_FRAGMENT):
            fragment = arguments[at : at + ARGUMENT_FRAGMENT]
            yield chunk({"tool_calls": [{"index": i, "function": {"arguments": fragment}}]})
    yield chunk({}, left, len(parts.token_ids), parts.finish_reason)
