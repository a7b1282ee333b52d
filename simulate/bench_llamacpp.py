"""llama.cpp on the same prompts, for `arena bench model`'s side-by-side comparison.

The prompts are rendered by Arena's engine (its chat template and tokenizer) and handed to
llama.cpp as token ids, so both decode the same sequences; llama.cpp decodes greedily until its
EOS token or the token budget. llama-cpp-python's `Llama` holds one sequence per context, so its
requests run one at a time: the bench reports it at a single stream only. llama.cpp is optional
(`make llama-cpp` builds it); without it, or without a GGUF file of the model, the report says why.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread

from arena.types import Completion, Message, SamplingParams


def unavailable_reason(gguf: Path | None) -> str | None:
    """Why llama.cpp cannot run here (None when it can)."""
    if importlib.util.find_spec("llama_cpp") is None:
        return "llama-cpp-python is not installed (`make llama-cpp` builds it)"
    if gguf is None:
        return "no GGUF file of this model (give --gguf)"
    if not gguf.is_file():
        return f"{gguf} does not exist"
    return None


def quantization(gguf: Path) -> str:
    """The quantization a GGUF file's name states (`…Q4_1.gguf` → `Q4_1`), else its stem."""
    stem = gguf.stem
    return stem.rsplit(".", 1)[-1] if "." in stem else stem


class LlamaCppChat:
    """A llama.cpp context answering `chat` like Arena's engine, one request at a time."""

    def __init__(self, gguf: Path, render: Any, *, threads: int | None = None, context: int = 4096) -> None:
        from llama_cpp import Llama

        self._render = render  # messages -> prompt token ids (Arena's engine's rendering)
        self._llm = Llama(
            model_path=str(gguf), n_ctx=context, n_threads=threads or os.cpu_count() or 1, verbose=False
        )
        self._eos = int(self._llm.token_eos())
        self._lock = anyio.Lock()

    def _generate(self, prompt: list[int], max_tokens: int) -> list[int]:
        tokens: list[int] = []
        for token in self._llm.generate(prompt, temp=0.0, top_k=1, top_p=1.0, min_p=0.0, reset=True):
            tokens.append(int(token))
            if token == self._eos or len(tokens) >= max_tokens:
                break
        return tokens

    async def chat(self, messages: list[Message], *, params: SamplingParams | None = None) -> Completion:
        """Greedy completion of the rendered prompt (sampling settings other than the budget are ignored)."""
        params = params or SamplingParams()
        prompt = list(self._render(messages))
        async with self._lock:
            ids = await anyio.to_thread.run_sync(self._generate, prompt, params.max_tokens)
        return Completion(
            text=self._llm.detokenize(ids).decode("utf-8", errors="replace"),
            finish_reason="stop" if ids and ids[-1] == self._eos else "length",
            prompt_token_ids=prompt,
            completion_token_ids=ids,
            model="llama.cpp",
        )
