"""The local chat model: transformers on CPU (or GPU), with dynamic batching and xgrammar.

Concurrent `chat` calls are gathered by a `DynamicBatcher` into one batched decode (see
`simulate.decoding`) that runs in a worker thread, one batch at a time. Prompts are rendered with
the tokenizer's chat template and the model's template arguments (`simulate.chat_format`), tools
included; the policy's turns inside an episode's token session extend its token chain as the HTTP
token-id client does (`simulate.token_chain`). The completion comes back as raw text (Hermes
`<tool_call>` blocks stay in `Completion.text`) with the prompt and completion token ids and the
completion logprobs, which the trainer needs.

The trainer reaches the underlying model through `.model` / `.tokenizer`, builds a backend around
an already loaded model with `LocalChatModel(model, tokenizer)`, and swaps in new weights with
`load_weights(path)` or `load_state_dict(...)` (`simulate.local_weights`); both wait for the
running batch to finish.

Why an engine of our own rather than a serving library: on CPU this engine samples with the
trainer's own parameters in the trainer's process (GRPO's rollouts see every optimizer step with
nothing to copy or reload, `simulate.fast_decode` follows the weights in place) and returns the
token ids and log-probs the token chains and the importance correction need. vLLM cannot share the
trainer's environment (it pins another torch) and is what Arena talks to over HTTP on GPUs;
llama.cpp would need a GGUF export after every step and samples from quantized weights that differ
from the trainer's (`arena bench model` measures both side by side).
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import structlog

from arena.protocols import ModelError
from arena.types import Completion, Message, SamplingParams, ToolSpec, Usage
from simulate.batching import DynamicBatcher, Job
from simulate.calls import current_role, record_completion, record_failure
from simulate.chat_format import render_chat, visible_text
from simulate.constrained import GrammarCache
from simulate.decoding import DecodeRequest, DecodeResult, decode_batch
from simulate.fast_decode import FastDecoder, unsupported_reason
from simulate.kv_reuse import (
    DEFAULT_BATCH_KV_BYTES,
    DEFAULT_STORE_BYTES,
    PrefixKVStore,
    kv_bytes_per_token,
    kv_chunks,
)
from simulate.local_weights import WeightSwaps
from simulate.model_errors import ModelRequestError
from simulate.precision import Dtype, resolve_dtype
from simulate.token_chain import ChatRenderer, begin_turn, chained_prompt, current_session, end_turn
from simulate.token_prefix import TokenPrefixCache

log = structlog.get_logger(__name__)


def resolve_device(device: str) -> str:
    """`auto` → `cuda` when a GPU is visible, else `cpu`; anything else is passed through."""
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def _stop_ids(model: Any, tokenizer: Any) -> set[int]:
    ids: set[int] = set()
    for source in (getattr(model, "generation_config", None), tokenizer):
        value = getattr(source, "eos_token_id", None)
        if isinstance(value, int):
            ids.add(value)
        elif isinstance(value, list | tuple):
            ids.update(int(v) for v in value)
    return ids


class LocalChatModel(WeightSwaps):
    """A `ChatModel` over a transformers causal LM, batching concurrent requests."""

    backend = "local"

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        name: str = "local",
        role: str = "policy",
        max_batch: int = 32,
        batch_wait_ms: float = 5.0,
        chat_template: str | None = None,
        chat_template_kwargs: Mapping[str, Any] | None = None,
        kv_reuse_bytes: int = DEFAULT_STORE_BYTES,
        max_batch_kv_bytes: int = DEFAULT_BATCH_KV_BYTES,
        fast_decode: bool = True,
    ) -> None:
        self.name = name
        self.role = role
        self._model = model
        self._tokenizer = tokenizer
        # The template's own arguments (`simulate.chat_format`): the policy's are the trainer's.
        self.chat_template_kwargs = dict(chat_template_kwargs or {})
        self._chain_renderer: ChatRenderer | None = None
        if chat_template is not None:
            tokenizer.chat_template = chat_template
        if getattr(tokenizer, "chat_template", None) is None:
            from simulate.embedded import tool_chat_template

            log.warning("local_model.no_chat_template", model=name, using="chatml_tools")
            tokenizer.chat_template = tool_chat_template()
        self._stop_token_ids = _stop_ids(model, tokenizer)
        if not self._stop_token_ids:
            raise ModelError(
                f"model {name}: neither the tokenizer nor the generation config names an EOS token"
            )
        self._vocab_size = int(model.config.vocab_size)
        self.context_length = int(getattr(model.config, "max_position_embeddings", 0) or 4096)
        self._grammars = GrammarCache(
            tokenizer, vocab_size=self._vocab_size, stop_token_ids=sorted(self._stop_token_ids)
        )
        self._prefixes = TokenPrefixCache(list(getattr(tokenizer, "all_special_tokens", [])))
        # Finished rows' KV caches: a conversation's next turn prefills only what is new (0: off).
        self._kv_store = PrefixKVStore(kv_reuse_bytes) if kv_reuse_bytes > 0 else None
        # Queued rows are decoded in as many batches as keep each padded cache under this budget:
        # 32 long rows at once took 16 GB and killed a learn bench run.
        self._batch_tokens = max(1, max_batch_kv_bytes // kv_bytes_per_token(model))
        # Held by the decode thread for a whole batch and by weight swaps: never both at once.
        self._model_lock = threading.Lock()
        # The layers a served LoRA adapter changed, as they were before it (`load_adapter`).
        self._adapter_base: dict[str, Any] = {}
        # Tokens after the prefill go through the lean Llama step where the model qualifies.
        self._fast = FastDecoder.for_model(model) if fast_decode else None
        if fast_decode and self._fast is None:
            log.info("local_model.transformers_decode", model=name, reason=unsupported_reason(model))
        self._batcher: DynamicBatcher[DecodeRequest, DecodeResult] = DynamicBatcher(
            self._run_batch, max_batch=max_batch, collect_s=batch_wait_ms / 1000, name=f"local:{name}"
        )

    # ----------------------------------------------------------------------------- construction
    @classmethod
    def load(
        cls,
        path: str | Path,
        *,
        device: str = "auto",
        name: str | None = None,
        role: str = "policy",
        max_batch: int = 32,
        batch_wait_ms: float = 5.0,
        cache_dir: Path | None = None,
        dtype: Dtype | None = None,
        chat_template_kwargs: Mapping[str, Any] | None = None,
        fast_decode: bool = True,
    ) -> LocalChatModel:
        """Load a model folder (safetensors + tokenizer), or `"embedded"` for SmolLM2-135M-Instruct.

        `dtype` None is float32 on CPU, where greedy decoding then gives the same tokens batched
        or alone (reproducible evaluations), and bfloat16 on GPU; "auto" is bfloat16 wherever the
        device computes it natively (`simulate.precision`). `fast_decode` False decodes every token
        through transformers' forward (the benchmark's comparison; `simulate.fast_decode`).
        Blocking (seconds); from async code
        call it through `anyio.to_thread.run_sync`.
        """
        if str(path) == "embedded":
            from simulate.embedded import EMBEDDED_MODEL_NAME, EmbeddedModelMissing, ensure_embedded_model

            try:
                folder = ensure_embedded_model(cache_dir)
            except EmbeddedModelMissing as exc:
                raise ModelError(str(exc)) from exc
            name = name or EMBEDDED_MODEL_NAME
        else:
            folder = Path(path)
            if not (folder / "config.json").is_file():
                raise ModelError(
                    f"{folder} is not a model folder (no config.json); give a transformers model "
                    "folder or 'embedded'"
                )
            name = name or folder.name
        try:
            import torch  # noqa: F401 - checked here so a missing install gets this message
            from transformers import AutoModelForCausalLM, AutoTokenizer
        except ImportError as exc:
            raise ModelError(
                f"the local backend needs torch and transformers ({exc}); run `make setup` or "
                "`pip install torch transformers`"
            ) from exc
        resolved = resolve_device(device)
        torch_dtype = resolve_dtype(dtype or ("float32" if resolved == "cpu" else "auto"), resolved)
        started = time.perf_counter()
        try:
            tokenizer = AutoTokenizer.from_pretrained(str(folder))
            model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch_dtype).to(resolved)
        except (OSError, ValueError) as exc:
            raise ModelError(f"cannot load model from {folder}: {exc}") from exc
        model.eval()
        log.info(
            "local_model.loaded",
            model=name,
            path=str(folder),
            device=resolved,
            dtype=str(torch_dtype).removeprefix("torch."),
            seconds=round(time.perf_counter() - started, 2),
        )
        return cls(
            model,
            tokenizer,
            name=name,
            role=role,
            max_batch=max_batch,
            batch_wait_ms=batch_wait_ms,
            chat_template_kwargs=chat_template_kwargs,
            fast_decode=fast_decode,
        )

    # ------------------------------------------------------------------------- trainer access
    @property
    def model(self) -> Any:
        """The underlying transformers model (shared; do not modify it while requests run)."""
        return self._model

    @property
    def tokenizer(self) -> Any:
        """The tokenizer, with the tool-aware chat template."""
        return self._tokenizer

    @property
    def batcher(self) -> DynamicBatcher[DecodeRequest, DecodeResult]:
        """The request batcher (its statistics are useful in benchmarks)."""
        return self._batcher

    # ------------------------------------------------------------------------------- rendering
    def render_prompt(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec] | None = None,
        template_kwargs: Mapping[str, Any] | None = None,
    ) -> list[int]:
        """The prompt token ids exactly as the model sees them (chat template, tools, generation prompt).

        Where the conversation extends one this model already completed, the ids of that earlier
        prompt and completion are reused as they were (see `simulate.token_prefix`).
        """
        return self._encode(messages, tools, template_kwargs)[1]

    def _encode(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec] | None,
        template_kwargs: Mapping[str, Any] | None = None,
    ) -> tuple[str, list[int]]:
        """The rendered prompt text and its ids (earlier turns' ids reused)."""
        if not messages:
            raise ModelRequestError("no messages to complete")
        text = render_chat(
            self._tokenizer,
            [m.openai() for m in messages],
            [t.openai() for t in tools] if tools else None,
            self.chat_template_kwargs if template_kwargs is None else template_kwargs,
            add_generation_prompt=True,
        )
        return text, self._prefixes.encode(text, self._tokenize)

    async def _grammar(self, params: SamplingParams, tools: list[ToolSpec] | None) -> Any:
        """The compiled output grammar the request asks for, if any (compiled off the event loop)."""
        constrained = params.constrain_tool_calls or params.require_tool_call
        if params.require_tool_call and not tools:
            raise ModelRequestError("require_tool_call needs tools")
        if params.json_schema is not None:
            if constrained:
                raise ModelRequestError("json_schema and constrained tool calls cannot be combined")
            return await anyio.to_thread.run_sync(self._grammars.compile, params.json_schema)
        if constrained and tools:
            compile_calls = functools.partial(
                self._grammars.compile_tool_calls, list(tools), required=params.require_tool_call
            )
            return await anyio.to_thread.run_sync(compile_calls)
        return None

    def _renderer(self, template_kwargs: Mapping[str, Any]) -> ChatRenderer:
        """The client-side renderer of token chains, for these template arguments."""
        if self._chain_renderer is None or self._chain_renderer.template_kwargs != dict(template_kwargs):
            self._chain_renderer = ChatRenderer(self._tokenizer, template_kwargs=template_kwargs)
        return self._chain_renderer

    def _tokenize(self, text: str) -> list[int]:
        return list(self._tokenizer(text, add_special_tokens=False)["input_ids"])

    def _remember(self, prompt_text: str, prompt_ids: list[int], completion_ids: list[int]) -> None:
        """Remember a finished sequence by its text: the rendered prompt, then the sampled ids decoded."""
        completion = self._tokenizer.decode(
            completion_ids, skip_special_tokens=False, clean_up_tokenization_spaces=False
        )
        self._prefixes.remember(prompt_text + completion, prompt_ids + completion_ids)

    # ------------------------------------------------------------------------------------ chat
    async def chat(
        self,
        messages: list[Message],
        *,
        tools: list[ToolSpec] | None = None,
        params: SamplingParams | None = None,
        chat_template_kwargs: Mapping[str, Any] | None = None,
    ) -> Completion:
        """One completion (batched with whatever else is being asked concurrently).

        `chat_template_kwargs` replaces the model's own template arguments for this request (a
        server's client asking for its format, as vLLM allows).
        """
        params = params or SamplingParams()
        template_kwargs = self.chat_template_kwargs if chat_template_kwargs is None else chat_template_kwargs
        role = current_role(self.role)
        started = time.perf_counter()
        prompt_ids: list[int] = []
        # The policy's turns inside an episode's token session extend its chain (`simulate.token_chain`).
        chained = role == "policy" and current_session() is not None
        prompt_text = ""
        try:
            if chained:
                if not messages:
                    raise ModelRequestError("no messages to complete")
                begin_turn(messages, tools)
                prompt_ids = chained_prompt(self._renderer(template_kwargs), messages, tools)
            else:
                prompt_text, prompt_ids = self._encode(messages, tools, template_kwargs)
            room = self.context_length - len(prompt_ids)
            if room < 1:
                raise ModelRequestError(
                    f"the prompt is {len(prompt_ids)} tokens; the model's context is {self.context_length}"
                )
            grammar = await self._grammar(params, tools)
            request = DecodeRequest(prompt_ids, params, min(params.max_tokens, room), grammar)
            result = await self._batcher.submit(request)
        except Exception as exc:
            error = exc if isinstance(exc, ModelError) else ModelError(f"local generation failed: {exc}")
            record_failure(role, self.backend, self.name, started, error, prompt_tokens=len(prompt_ids))
            if error is exc:
                raise
            raise error from exc
        if chained:
            end_turn(prompt_ids, result.token_ids)
        else:
            self._remember(prompt_text, prompt_ids, result.token_ids)
        completion = Completion(
            text=visible_text(result.text, template_kwargs),
            finish_reason=result.finish_reason,
            prompt_token_ids=prompt_ids,
            completion_token_ids=result.token_ids,
            completion_logprobs=result.logprobs if params.logprobs else None,
            completion_forced=result.forced,
            usage=Usage(prompt_tokens=len(prompt_ids), completion_tokens=len(result.token_ids)),
            model=self.name,
            latency_s=time.perf_counter() - started,
        )
        record_completion(role, self.backend, self.name, completion)
        return completion

    def _run_batch(self, jobs: Sequence[Job[DecodeRequest, DecodeResult]]) -> None:
        """Decode one batch (worker thread)."""
        started = time.perf_counter()
        widths = [len(job.request.prompt_ids) + job.request.max_new_tokens for job in jobs]
        chunks = kv_chunks(widths, self._batch_tokens)
        with self._model_lock:
            for chunk in chunks:
                part = [jobs[i] for i in chunk]
                decode_batch(
                    self._model,
                    self._tokenizer,
                    [job.request for job in part],
                    stop_token_ids=self._stop_token_ids,
                    vocab_size=self._vocab_size,
                    on_done=lambda i, result, part=part: part[i].finish(result),
                    is_cancelled=lambda i, part=part: part[i].cancelled,
                    store=self._kv_store,
                    fast=self._fast,
                )
        store = self._kv_store
        log.debug(
            "local_model.batch",
            model=self.name,
            size=len(jobs),
            decode_batches=len(chunks),
            seconds=round(time.perf_counter() - started, 3),
            kv_entries=len(store) if store is not None else 0,
            kv_reused_tokens=store.reused_tokens if store is not None else 0,
        )
