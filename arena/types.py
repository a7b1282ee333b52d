"""Message, tool-call and completion types shared by every layer.

These are the boundary types between the episode runner, the model backends and the trainer.
They follow the OpenAI chat format closely so that an OpenAI-compatible server (vLLM) maps onto
them without translation.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Role = Literal["system", "user", "assistant", "tool"]


class ToolSpec(BaseModel):
    """A tool as the model sees it: name, description and a JSON schema for its arguments."""

    model_config = ConfigDict(frozen=True)

    name: str
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})

    def openai(self) -> dict[str, Any]:
        """The OpenAI `tools=[...]` entry for this tool."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }


class ToolCall(BaseModel):
    """One tool call made by the policy. `arguments` is already parsed JSON."""

    id: str = ""
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class Message(BaseModel):
    """One chat message. `tool_calls` only on assistant messages; `tool_call_id`/`name` on tool ones."""

    role: Role
    content: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    tool_call_id: str | None = None
    name: str | None = None

    def openai(self) -> dict[str, Any]:
        """The OpenAI wire form of this message."""
        out: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.tool_calls:
            out["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": _json_dumps(c.arguments)},
                }
                for c in self.tool_calls
            ]
        if self.tool_call_id is not None:
            out["tool_call_id"] = self.tool_call_id
        if self.name is not None:
            out["name"] = self.name
        return out


class SamplingParams(BaseModel):
    """How to sample one completion."""

    temperature: float = Field(default=0.0, ge=0.0, le=5.0)
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    # Truncation and penalties, vLLM's meaning: top_k 0 keeps every token, min_p drops tokens below
    # that share of the likeliest one, repetition_penalty divides (or multiplies, if negative) the
    # logits of tokens already in the prompt or output. The defaults leave the distribution alone.
    top_k: int = Field(default=0, ge=0)
    min_p: float = Field(default=0.0, ge=0.0, le=1.0)
    repetition_penalty: float = Field(default=1.0, gt=0.0, le=10.0)
    max_tokens: int = Field(default=256, ge=1, le=32768)
    stop: list[str] = Field(default_factory=list)
    seed: int | None = None
    logprobs: bool = False
    # A JSON schema the output must satisfy (grammar-constrained locally, `response_format` over HTTP).
    json_schema: dict[str, Any] | None = None
    # Tool calls in the output must be well-formed calls of the given tools whose arguments satisfy
    # the tool's schema (no unknown tool or argument, no broken JSON); free text stays free. Locally
    # an xgrammar structural tag, over HTTP OpenAI's `strict` function calling.
    constrain_tool_calls: bool = False
    # The output must hold at least one tool call (OpenAI's `tool_choice: "required"`); the call is
    # constrained as above. Needs tools.
    require_tool_call: bool = False

    @property
    def truncates(self) -> bool:
        """Whether sampling departs from the temperature-scaled softmax (truncation or a penalty)."""
        return self.top_p < 1.0 or self.top_k > 0 or self.min_p > 0.0 or self.repetition_penalty != 1.0


class Usage(BaseModel):
    """Token counts of one model call."""

    prompt_tokens: int = 0
    completion_tokens: int = 0


FinishReason = Literal["stop", "length", "tool_calls", "error"]


class Completion(BaseModel):
    """What a backend returns for one chat request.

    `text` is the raw assistant text (Hermes `<tool_call>` blocks included when the backend does not
    parse them); `tool_calls` holds native tool calls when the backend parsed them. When the
    backend can, it returns the token ids of the rendered prompt and of the completion (and their
    logprobs) so the trainer can build loss masks without re-tokenizing.
    """

    text: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    finish_reason: FinishReason = "stop"
    prompt_token_ids: list[int] | None = None
    completion_token_ids: list[int] | None = None
    completion_logprobs: list[float] | None = None
    # Positions in `completion_token_ids` that constrained decoding forced (its grammar admitted no
    # other token): no choice of the policy's, so the trainer does not train them.
    completion_forced: list[int] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    model: str = ""
    latency_s: float = 0.0


def _json_dumps(value: Any) -> str:
    import json

    return json.dumps(value, ensure_ascii=False)
