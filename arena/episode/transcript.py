"""The record of one episode: messages, tool calls and results, timings, tokens for training.

Everything here is a pydantic model so that a transcript round-trips through JSON (the store keeps
it as a JSON column). The token part is built by `TokenRecorder`: for every policy turn the backend
reports the prompt it rendered and the tokens it sampled; consecutive prompts normally extend each
other (prompt k+1 = prompt k + completion k + tool results / user turn / template glue), and the
recorder stores that as one `TokenChain` of segments with a mask that is 1 only on sampled tokens.
When a prompt does not extend what came before (the template re-rendered earlier turns
differently, or a history window dropped old turns) the recorder starts a new chain and records a
`ChainBreak` instead of splicing mismatched tokens: every chain is exactly what the model saw.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from arena.env.instance import ToolResult
from arena.episode.parser import MalformedCall
from arena.types import Message, ToolCall, Usage

FinishKind = Literal[
    "answered",  # the agent replied without calling a tool (autonomous mode)
    "user_stop",  # the (simulated) user ended the conversation
    "max_turns",  # the turn cap was reached
    "max_tokens",  # the episode's total token budget was spent
    "format_error",  # too many consecutive turns with malformed tool calls
    "stuck",  # the same call failed max_repeated_failures times
    "env_error",  # the environment (or the user simulator) failed, not the policy
    "model_error",  # the policy backend raised ModelError or timed out
]

SegmentKind = Literal["prompt", "policy", "context"]


class CallRecord(BaseModel):
    """One executed tool call and its result, in episode order."""

    turn: int
    call: ToolCall
    result: ToolResult


class MalformedRecord(BaseModel):
    """One malformed tool call and the turn it happened in."""

    turn: int
    error: MalformedCall


class TurnRecord(BaseModel):
    """One policy turn: what the model returned and how long things took."""

    index: int
    text: str
    content: str
    native_tool_calls: bool = False  # the backend parsed the calls itself
    n_calls: int = 0
    n_malformed: int = 0
    finish_reason: str = "stop"
    usage: Usage = Field(default_factory=Usage)
    model_s: float = 0.0
    tools_s: float = 0.0
    user_s: float = 0.0


class ToolStat(BaseModel):
    """Success and failure counts of one tool in one episode."""

    ok: int = 0
    failed: int = 0


class Timings(BaseModel):
    """Wall-clock totals of one episode, in seconds."""

    total_s: float = 0.0
    model_s: float = 0.0
    tools_s: float = 0.0
    user_s: float = 0.0


class Segment(BaseModel):
    """A run of tokens of one kind. Only `policy` segments were sampled by the policy."""

    kind: SegmentKind
    token_ids: list[int]
    logprobs: list[float] | None = None  # policy segments, when the backend returned them
    # Policy segments: positions in `token_ids` that constrained decoding forced (not trained).
    forced: list[int] = Field(default_factory=list)
    turn: int


class TokenChain(BaseModel):
    """One consistent token sequence: a prompt followed by policy and context segments.

    `prompt_ids()` is the first prompt; `completion_ids()` everything after it; `mask()` is 1 on
    the policy's sampled tokens and 0 on tool results, user turns, template glue and the tokens a
    grammar forced; `logprobs()` has the sampled logprobs on policy tokens and 0.0 elsewhere.
    """

    segments: list[Segment] = Field(default_factory=list)

    def prompt_ids(self) -> list[int]:
        """The token ids of the chain's first prompt."""
        return list(self.segments[0].token_ids) if self.segments else []

    def completion_ids(self) -> list[int]:
        """Every token after the first prompt, policy and context alike."""
        return [t for s in self.segments[1:] for t in s.token_ids]

    def mask(self) -> list[int]:
        """1 on the policy's own choices (policy tokens no grammar forced), 0 elsewhere; aligned with
        `completion_ids()`."""
        out: list[int] = []
        for s in self.segments[1:]:
            on = [1 if s.kind == "policy" else 0] * len(s.token_ids)
            for i in s.forced:
                on[i] = 0
            out.extend(on)
        return out

    def logprobs(self) -> list[float]:
        """Per-token logprobs aligned with `completion_ids()` (0.0 where not policy or unknown)."""
        out: list[float] = []
        for s in self.segments[1:]:
            if s.kind == "policy" and s.logprobs is not None and len(s.logprobs) == len(s.token_ids):
                out.extend(s.logprobs)
            else:
                out.extend([0.0] * len(s.token_ids))
        return out

    def all_ids(self) -> list[int]:
        """The whole sequence, prompt included."""
        return [t for s in self.segments for t in s.token_ids]

    def policy_turns(self) -> list[int]:
        """The turns whose sampled tokens this chain trains."""
        return [s.turn for s in self.segments if s.kind == "policy"]


class ChainBreak(BaseModel):
    """A prompt that did not extend the tokens before it, so a new chain was started."""

    turn: int
    reason: Literal["rerendered", "truncated_history"]
    position: int  # index of the first differing token (len of the common prefix)
    expected_len: int
    prompt_len: int


class Transcript(BaseModel):
    """Everything that happened in one episode.

    `messages` is the full conversation (system prompt first) in OpenAI form; assistant messages
    keep the model's raw text when it wrote Hermes tool calls (so re-rendering reproduces what it
    generated) and carry native `tool_calls` when the backend parsed them. `calls` pairs every
    executed call with its result; `malformed_errors` lists calls that could not be executed.
    """

    task_id: str = ""
    env: str = ""
    mode: Literal["autonomous", "conversational"] = "autonomous"
    policy_model: str = ""
    messages: list[Message] = Field(default_factory=list)
    turns: list[TurnRecord] = Field(default_factory=list)
    calls: list[CallRecord] = Field(default_factory=list)
    malformed_errors: list[MalformedRecord] = Field(default_factory=list)
    malformed_calls: int = 0  # len(malformed_errors); a field so the verifier reads it directly
    tool_stats: dict[str, ToolStat] = Field(default_factory=dict)
    finish: FinishKind = "answered"
    finish_detail: str = ""
    final_answer: str = ""  # the last assistant message without tool calls ("" if none)
    usage: Usage = Field(default_factory=Usage)
    timings: Timings = Field(default_factory=Timings)
    chains: list[TokenChain] = Field(default_factory=list)
    chain_breaks: list[ChainBreak] = Field(default_factory=list)
    tokens_complete: bool = False  # every turn reported prompt and completion token ids
    history_turns: int | None = None  # the history window the policy saw (None: full history)
    # Free-form facts about how the episode was produced, kept by the store with the transcript
    # (e.g. "simulator": the helper model, seed and sampling of a simulated environment).
    metadata: dict[str, Any] = Field(default_factory=dict)

    @property
    def tool_calls(self) -> list[ToolCall]:
        """The executed tool calls, in order."""
        return [c.call for c in self.calls]

    @property
    def tool_results(self) -> list[ToolResult]:
        """The results of the executed tool calls, in order."""
        return [c.result for c in self.calls]

    @property
    def segments(self) -> list[Segment]:
        """All segments of all chains, in order (a flat view; prefer `chains` for training)."""
        return [s for chain in self.chains for s in chain.segments]

    @property
    def num_turns(self) -> int:
        """How many times the policy was called."""
        return len(self.turns)


class TokenRecorder:
    """Builds token chains from the (prompt ids, completion ids) each turn reports."""

    def __init__(self) -> None:
        self.chains: list[TokenChain] = []
        self.breaks: list[ChainBreak] = []
        self.complete = True
        self._seq: list[int] = []  # the current chain's tokens, flattened

    def add_turn(
        self,
        turn: int,
        prompt_ids: list[int] | None,
        completion_ids: list[int] | None,
        logprobs: list[float] | None,
        *,
        truncated_history: bool = False,
        forced: list[int] | None = None,
    ) -> None:
        """Record one policy turn (`forced`: the completion's positions a grammar forced). Turns
        without token ids make the record incomplete."""
        if prompt_ids is None or completion_ids is None:
            self.complete = False
            self._seq = []  # the next turn cannot be attached to anything safely
            return
        lp = logprobs if logprobs is not None and len(logprobs) == len(completion_ids) else None
        seq = self._seq
        extends = bool(self.chains) and bool(seq) and prompt_ids[: len(seq)] == seq
        if extends:
            chain = self.chains[-1]
            extra = prompt_ids[len(seq) :]
            if extra:
                chain.segments.append(Segment(kind="context", token_ids=list(extra), turn=turn))
        else:
            if self.chains and seq:
                self.breaks.append(
                    ChainBreak(
                        turn=turn,
                        reason="truncated_history" if truncated_history else "rerendered",
                        position=_common_prefix(seq, prompt_ids),
                        expected_len=len(seq),
                        prompt_len=len(prompt_ids),
                    )
                )
            chain = TokenChain(segments=[Segment(kind="prompt", token_ids=list(prompt_ids), turn=turn)])
            self.chains.append(chain)
        chain.segments.append(
            Segment(
                kind="policy",
                token_ids=list(completion_ids),
                logprobs=lp,
                forced=[i for i in forced or [] if 0 <= i < len(completion_ids)],
                turn=turn,
            )
        )
        self._seq = list(prompt_ids) + list(completion_ids)


def _common_prefix(a: list[int], b: list[int]) -> int:
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n
