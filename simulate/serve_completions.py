"""`POST /v1/completions` of the model server: raw prompts, token ids in and out.

The prompt is a string, a list of token ids, or a list of either (a batch); no chat template is
applied. With vLLM's `return_token_ids` each choice carries `prompt_token_ids` and `token_ids`
(the completion's ids, the stop token that ended it included), so a trainer that tokenizes its
own prompts can drive this server exactly as it drives vLLM. `logprobs: 0` returns the sampled
tokens' logprobs (of the raw model distribution, as vLLM reports them) in the legacy
`tokens` / `token_logprobs` / `top_logprobs` / `text_offset` shape; more alternatives per position
are refused, since the local decode loop computes none. `stream: true` sends `text_completion`
chunks, one per token, the first of each choice with its `prompt_token_ids`.

Served only over a model with a local decode loop (`simulate.local.LocalChatModel`), whose
batcher takes raw token ids alongside its chat requests.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator, Sequence
from typing import Any, Protocol, runtime_checkable

import anyio
from pydantic import BaseModel, ConfigDict, Field

from arena.protocols import ModelError
from arena.types import SamplingParams
from simulate.decoding import DecodeRequest, DecodeResult
from simulate.generation_defaults import sampling_fields
from simulate.serve_chat import MAX_N, StreamOptions
from simulate.serve_stream import DONE, sse, text_spans, token_pieces, token_strings
from simulate.wire_errors import WireError

MAX_PROMPTS = 64


@runtime_checkable
class RawCompleter(Protocol):
    """A model whose decode loop takes raw prompt token ids (`simulate.local.LocalChatModel`)."""

    @property
    def model(self) -> Any: ...

    @property
    def tokenizer(self) -> Any: ...

    @property
    def batcher(self) -> Any: ...

    context_length: int


class CompletionRequest(BaseModel):
    """The accepted subset of an OpenAI (and vLLM) completion request."""

    model_config = ConfigDict(extra="ignore")

    model: str | None = None
    # A text, token ids, or a batch of either (mixed too, which OpenAI's schema does not offer).
    prompt: str | list[int] | list[str | list[int]]
    # OpenAI's default for completions; null: up to the model's context (as vLLM).
    max_tokens: int | None = Field(default=16, ge=1, le=32768)
    n: int = Field(default=1, ge=1, le=MAX_N)
    # Sampling fields left out come from the model's generation config (`simulate.generation_defaults`).
    temperature: float | None = Field(default=None, ge=0.0, le=5.0)
    top_p: float | None = Field(default=None, gt=0.0, le=1.0)
    top_k: int | None = Field(default=None, ge=-1)
    min_p: float | None = Field(default=None, ge=0.0, le=1.0)
    repetition_penalty: float | None = Field(default=None, gt=0.0, le=10.0)
    stop: str | list[str] | None = None
    seed: int | None = None
    logprobs: int | None = Field(default=None, ge=0)
    echo: bool = False
    return_token_ids: bool = False
    stream: bool = False
    stream_options: StreamOptions | None = None


def prompt_ids(req: CompletionRequest, tokenizer: Any, vocab_size: int) -> list[list[int]]:
    """The token ids of each prompt of `req`; `WireError` naming what is wrong with them."""
    raw = req.prompt
    # One string or one list of ids is one prompt; otherwise a list of either is a batch.
    single = isinstance(raw, str) or (bool(raw) and all(isinstance(t, int) for t in raw))
    prompts: list[Any] = [raw] if single else list(raw)
    if not prompts or len(prompts) > MAX_PROMPTS:
        raise WireError(f"prompt must hold 1 to {MAX_PROMPTS} prompts, got {len(prompts)}", param="prompt")
    out: list[list[int]] = []
    for i, prompt in enumerate(prompts):
        if isinstance(prompt, str):
            # As vLLM's default (`add_special_tokens`): the tokenizer adds what it adds to a text.
            ids = list(tokenizer(prompt)["input_ids"])
        else:
            ids = list(prompt)
            bad = [t for t in ids if not 0 <= t < vocab_size]
            if bad:
                raise WireError(
                    f"prompt[{i}] holds token ids outside the vocabulary (0..{vocab_size - 1}): {bad[:5]}",
                    param="prompt",
                )
        if not ids:
            raise WireError(f"prompt[{i}] is empty", param="prompt")
        out.append(ids)
    return out


def _params(req: CompletionRequest, sample: int, defaults: dict[str, Any]) -> SamplingParams:
    return SamplingParams(
        **sampling_fields(req, defaults),
        max_tokens=req.max_tokens or defaults.get("max_tokens", 32768),
        stop=[req.stop] if isinstance(req.stop, str) else list(req.stop or []),
        seed=None if req.seed is None else req.seed + sample,
        logprobs=req.logprobs is not None,
    )


async def complete(
    model: RawCompleter, req: CompletionRequest, defaults: dict[str, Any] | None = None
) -> tuple[list[list[int]], list[DecodeResult]]:
    """Decode `req.n` samples of every prompt, all batched together; results in vLLM's order.

    Choice `i * n + j` is sample `j` of prompt `i`; `defaults` fill the sampling fields the request
    leaves out (the model's generation config, `simulate.generation_defaults`).
    """
    defaults = defaults or {}
    if req.logprobs:
        raise WireError(
            "this server returns only the sampled tokens' logprobs: send logprobs=0", param="logprobs"
        )
    if req.echo and req.logprobs is not None:
        raise WireError(
            "echo with logprobs would need the prompt's logprobs, which are not computed", param="echo"
        )
    if req.stream_options is not None and not req.stream:
        raise WireError("stream_options is only allowed with stream=true", param="stream_options")
    tokenizer = model.tokenizer
    prompts = prompt_ids(req, tokenizer, int(model.model.config.vocab_size))
    requests: list[DecodeRequest] = []
    for i, ids in enumerate(prompts):
        room = model.context_length - len(ids)
        if room < 1:
            raise WireError(
                f"prompt[{i}] is {len(ids)} tokens; the model's context is {model.context_length}",
                param="prompt",
            )
        requests += [
            DecodeRequest(ids, _params(req, j, defaults), min(req.max_tokens or room, room))
            for j in range(req.n)
        ]
    results: list[DecodeResult | None] = [None] * len(requests)
    errors: list[Exception] = []

    async def one(k: int) -> None:
        try:
            results[k] = await model.batcher.submit(requests[k])
        except Exception as exc:  # the batch failed: reported as a server error below
            errors.append(exc)

    async with anyio.create_task_group() as tg:
        for k in range(len(requests)):
            tg.start_soon(one, k)
    if errors:
        raise ModelError(f"local generation failed: {errors[0]}")
    return prompts, [r for r in results if r is not None]


def _legacy_logprobs(
    tokens: Sequence[str], logprobs: Sequence[float], offsets: Sequence[int]
) -> dict[str, Any]:
    return {
        "tokens": list(tokens),
        "token_logprobs": list(logprobs),
        # With logprobs=0 each position lists just the sampled token, as vLLM does.
        "top_logprobs": [{tok: lp} for tok, lp in zip(tokens, logprobs, strict=False)],
        "text_offset": list(offsets),
    }


def _offsets(pieces: Sequence[str] | None, count: int, start: int) -> list[int]:
    """Where each of `count` tokens' text starts in a choice's text that opens with `start` echoed chars."""
    offsets: list[int] = []
    at = start
    for piece in pieces or [""] * count:
        offsets.append(at)
        at += len(piece)
    return offsets


class _Answer:
    """What the choices of a completion answer are made of (shared by the plain and streamed forms)."""

    def __init__(
        self, model: RawCompleter, req: CompletionRequest, prompts: list[list[int]], served: str
    ) -> None:
        self.req = req
        self.tokenizer = model.tokenizer
        self.prompts = prompts
        self.head = {
            "id": f"cmpl-{uuid.uuid4().hex}",
            "object": "text_completion",
            "created": int(time.time()),
            "model": served,
        }

    def prompt_of(self, k: int) -> list[int]:
        """The prompt ids of choice `k` (sample `k % n` of prompt `k // n`)."""
        return self.prompts[k // self.req.n]

    def echoed(self, k: int) -> str:
        """The prompt text that choice `k` opens with (only with `echo`)."""
        if not self.req.echo:
            return ""
        return str(self.tokenizer.decode(self.prompt_of(k), skip_special_tokens=True))

    def choice(
        self, k: int, text: str, result: DecodeResult, span: slice, offsets: list[int]
    ) -> dict[str, Any]:
        """Choice `k` carrying `text` and the tokens `span` of `result`."""
        choice: dict[str, Any] = {
            "index": k,
            "text": text,
            "logprobs": None,
            "finish_reason": None,
            "stop_reason": None,
        }
        if self.req.logprobs is not None:
            tokens = token_strings(self.tokenizer, result.token_ids[span])
            choice["logprobs"] = _legacy_logprobs(tokens, result.logprobs[span], offsets[span])
        if self.req.return_token_ids:
            choice["token_ids"] = result.token_ids[span]
        return choice

    def usage(self, results: list[DecodeResult]) -> dict[str, int]:
        """Every prompt counted once, every sample's tokens."""
        prompt = sum(len(p) for p in self.prompts)
        generated = sum(len(r.token_ids) for r in results)
        return {"prompt_tokens": prompt, "completion_tokens": generated, "total_tokens": prompt + generated}


def completion_body(
    model: RawCompleter,
    req: CompletionRequest,
    prompts: list[list[int]],
    results: list[DecodeResult],
    *,
    served: str,
) -> dict[str, Any]:
    """The whole `text_completion` answer."""
    answer = _Answer(model, req, prompts, served)
    choices = []
    for k, result in enumerate(results):
        echoed = answer.echoed(k)
        offsets: list[int] = []
        if req.logprobs is not None:
            pieces = token_pieces(answer.tokenizer, result.token_ids, result.text)
            offsets = _offsets(pieces, len(result.token_ids), len(echoed))
        choice = answer.choice(k, echoed + result.text, result, slice(None), offsets)
        choice["finish_reason"] = result.finish_reason
        if req.return_token_ids:
            choice["prompt_token_ids"] = answer.prompt_of(k)
        choices.append(choice)
    return {**answer.head, "choices": choices, "usage": answer.usage(results)}


async def completion_events(
    model: RawCompleter,
    req: CompletionRequest,
    prompts: list[list[int]],
    results: list[DecodeResult],
    *,
    served: str,
) -> AsyncIterator[str]:
    """The answer as `text_completion` chunks, one per token piece, then `[DONE]`."""
    answer = _Answer(model, req, prompts, served)
    for k, result in enumerate(results):
        echoed = answer.echoed(k)
        count = len(result.token_ids)
        pieces = token_pieces(answer.tokenizer, result.token_ids, result.text)
        if pieces is not None:
            spans, left = text_spans(pieces)
        else:  # tokens that do not split the text: one piece
            spans, left = ([(result.text, 0, count)], count) if result.text else ([], 0)
        offsets = _offsets(pieces, count, len(echoed))
        # The echoed prompt first, then the pieces; the last chunk has what is left and the finish.
        chunks = ([(echoed, 0, 0)] if echoed else []) + spans + [("", left, count)]
        for c, (text, first, end) in enumerate(chunks):
            choice = answer.choice(k, text, result, slice(first, end), offsets)
            if c == 0 and req.return_token_ids:
                choice["prompt_token_ids"] = answer.prompt_of(k)  # once per choice, as vLLM
            if c == len(chunks) - 1:
                choice["finish_reason"] = result.finish_reason
            yield sse({**answer.head, "choices": [choice]})
    if req.stream_options is not None and req.stream_options.include_usage:
        yield sse({**answer.head, "choices": [], "usage": answer.usage(results)})
    yield DONE
