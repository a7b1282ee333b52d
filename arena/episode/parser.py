"""Tool-call parsing: Hermes/Qwen `<tool_call>` blocks in text, and native OpenAI tool calls.

The parser is pure and total: whatever text a model emits, `parse_tool_calls` returns a
`ParsedTurn` and never raises. Every call that cannot be executed (bad JSON, no name, arguments
that are not an object, an unclosed tag, a tool that does not exist) becomes a `MalformedCall`
the episode runner turns into an error observation and counts against the policy.

`arena serve-model` reuses this module to turn raw text into native tool calls, so it depends on
nothing but the shared types.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Sequence
from typing import Any, Literal

from pydantic import BaseModel, Field

from arena.types import ToolCall

OPEN_TAG = "<tool_call>"
CLOSE_TAG = "</tool_call>"


def call_block_begin(name: str) -> str:
    """The text of a Hermes call block up to its arguments: `<tool_call>` and the tool's name."""
    return f'{OPEN_TAG}\n{{"name": {json.dumps(name, ensure_ascii=False)}, "arguments": '


# What follows the arguments object: the end of the call object and the closing tag.
CALL_BLOCK_END = f"}}\n{CLOSE_TAG}"


def in_schema_order(arguments: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """`arguments` with the schema's properties first, in the schema's order (then any others).

    Constrained decoding writes top-level arguments in schema order; training targets written the
    same way never teach the policy an order the grammar would refuse.
    """
    order = list((schema.get("properties") or {}).keys())
    rank = {name: i for i, name in enumerate(order)}
    return dict(sorted(arguments.items(), key=lambda item: rank.get(item[0], len(rank))))


def call_block(name: str, arguments_json: str) -> str:
    """One call as the chat template writes it (SFT targets, constrained decoding, HTTP replies)."""
    return call_block_begin(name) + arguments_json + CALL_BLOCK_END


MalformedKind = Literal[
    "bad_json",  # the block is not valid JSON
    "not_an_object",  # the block is JSON but not an object
    "missing_name",  # no "name", or it is not a non-empty string
    "bad_arguments",  # "arguments" is neither an object nor a JSON string holding one
    "unclosed_tag",  # <tool_call> without </tool_call>
    "stray_close_tag",  # </tool_call> without an opening tag
    "unknown_tool",  # a well-formed call to a tool the environment does not have
]

# Cap how much of a broken block is kept in the transcript: a runaway generation can be long.
_RAW_LIMIT = 500
# Tool arguments deeper than this are refused: nothing legitimate nests so deep, and deeper
# structures would hit recursion limits later (serialization, the store, the trainer).
_MAX_DEPTH = 32
# Tag matching is exact and case-sensitive, like the chat template that renders the tags.
_TAG_RE = re.compile(re.escape(OPEN_TAG) + "|" + re.escape(CLOSE_TAG))


class MalformedCall(BaseModel):
    """A tool call the runner cannot execute, with the reason shown to the agent."""

    kind: MalformedKind
    message: str
    raw: str = ""
    name: str | None = None  # when the call named a tool (unknown_tool, bad_arguments)
    id: str = ""  # the native call id, so the error observation can answer it


class ParsedTurn(BaseModel):
    """One assistant message split into visible content, executable calls and malformed calls."""

    content: str = ""
    calls: list[ToolCall] = Field(default_factory=list)
    errors: list[MalformedCall] = Field(default_factory=list)
    order: list[str] = Field(default_factory=list)  # ids of calls and errors as they appeared

    def in_order(self) -> list[ToolCall | MalformedCall]:
        """Calls and malformed calls in the order they appeared (observations follow this order)."""
        items: list[ToolCall | MalformedCall] = [*self.calls, *self.errors]
        rank = {item_id: i for i, item_id in enumerate(self.order)}
        return sorted(items, key=lambda item: rank.get(item.id, len(rank)))

    @property
    def has_tool_activity(self) -> bool:
        """True when the message tried to call a tool at all (well-formed or not)."""
        return bool(self.calls or self.errors)


def clean_text(text: str) -> str:
    """`text` with lone surrogates replaced, so that it can be encoded as UTF-8 (JSON, the store).

    `json.loads('"\\ud800"')` yields such strings, and a transcript holding one cannot be saved.
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")
    return text


class _TooDeep(Exception):
    pass


def _clean_value(value: Any, depth: int = 0) -> Any:
    """Decoded JSON with every string cleaned; raises `_TooDeep` past `_MAX_DEPTH` levels."""
    if depth > _MAX_DEPTH:
        raise _TooDeep
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, dict):
        return {clean_text(str(k)): _clean_value(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [_clean_value(v, depth + 1) for v in value]
    return value


def _clip(text: str) -> str:
    return text if len(text) <= _RAW_LIMIT else text[:_RAW_LIMIT] + "…"


def _loads(text: str) -> tuple[Any, str | None]:
    """`json.loads` that reports failure instead of raising (deep nesting, huge ints included)."""
    try:
        return _clean_value(json.loads(text)), None
    except _TooDeep:
        return None, f"JSON nested more than {_MAX_DEPTH} levels deep"
    except json.JSONDecodeError as exc:
        return None, f"invalid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
    except (ValueError, RecursionError) as exc:  # ValueError: int too long; RecursionError: nesting
        return None, f"invalid JSON ({type(exc).__name__})"


def _coerce_arguments(value: Any) -> tuple[dict[str, Any] | None, str | None]:
    """Arguments as an object; a JSON string holding an object is accepted (OpenAI's wire form)."""
    if value is None:
        return {}, None  # a call to a tool without parameters may omit them
    if isinstance(value, dict):
        return value, None
    if isinstance(value, str):
        if not value.strip():
            return {}, None
        parsed, err = _loads(value)
        if err is not None:
            return None, f'"arguments" is a string but not valid JSON: {err}'
        if isinstance(parsed, dict):
            return parsed, None
        return None, f'"arguments" must be a JSON object, got a string holding {_json_type(parsed)}'
    return None, f'"arguments" must be a JSON object, got {_json_type(value)}'


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if value is None:
        return "null"
    return "an object"


def _call_from_object(obj: Any, raw: str) -> ToolCall | MalformedCall:
    """Validate one decoded `{"name": ..., "arguments": ...}` object."""
    if not isinstance(obj, dict):
        return MalformedCall(
            kind="not_an_object",
            message=f"a tool call must be a JSON object with a name and arguments, got {_json_type(obj)}",
            raw=_clip(raw),
        )
    name = obj.get("name")
    if not isinstance(name, str) or not name.strip():
        return MalformedCall(
            kind="missing_name", message='the tool call has no "name" (a non-empty string)', raw=_clip(raw)
        )
    # Some Hermes-style models write "parameters"; accept it when "arguments" is absent.
    raw_args = obj["arguments"] if "arguments" in obj else obj.get("parameters")
    arguments, err = _coerce_arguments(raw_args)
    if arguments is None:
        return MalformedCall(kind="bad_arguments", message=err or "bad arguments", raw=_clip(raw), name=name)
    return ToolCall(name=name.strip(), arguments=arguments)


def parse_tool_calls(text: str, *, known_tools: Collection[str] | None = None) -> ParsedTurn:
    """Split assistant text into content, Hermes tool calls and malformed calls. Never raises.

    Each `<tool_call>…</tool_call>` block must hold one JSON object `{"name": str, "arguments":
    object | JSON string of an object}`; several blocks per message are allowed. `content` is the
    text outside the blocks, stripped. With `known_tools`, calls to other names are malformed
    (`unknown_tool`). Calls get ids `call_0`, `call_1`, … in order of appearance.
    """
    if not isinstance(text, str):  # defensive: a backend bug must not crash an episode
        text = "" if text is None else str(text)
    text = clean_text(text)
    pieces: list[str] = []
    results: list[ToolCall | MalformedCall] = []
    pos = 0
    while True:
        match = _TAG_RE.search(text, pos)
        if match is None:
            pieces.append(text[pos:])
            break
        pieces.append(text[pos : match.start()])
        if match.group() == CLOSE_TAG:
            results.append(
                MalformedCall(
                    kind="stray_close_tag",
                    message=f"found {CLOSE_TAG} without a matching {OPEN_TAG}",
                    raw=_clip(text[max(0, match.start() - 80) : match.end()]),
                )
            )
            pos = match.end()
            continue
        body_start = match.end()
        # The block ends at the first tag after it: a nested <tool_call> means the first one was
        # never closed, which is what a truncated or confused generation looks like.
        nxt = _TAG_RE.search(text, body_start)
        if nxt is None or nxt.group() == OPEN_TAG:
            end = len(text) if nxt is None else nxt.start()
            body = text[body_start:end]
            results.append(
                MalformedCall(
                    kind="unclosed_tag",
                    message=f"{OPEN_TAG} is not closed by {CLOSE_TAG}",
                    raw=_clip(OPEN_TAG + body),
                )
            )
            pos = end
            continue
        body = text[body_start : nxt.start()]
        pos = nxt.end()
        obj, err = _loads(body.strip())
        if err is not None:
            results.append(MalformedCall(kind="bad_json", message=err, raw=_clip(body.strip())))
        else:
            results.append(_call_from_object(obj, body.strip()))
    # Ids in order of appearance, malformed calls included, so each observation answers one call.
    for i, item in enumerate(results):
        item.id = f"call_{i}"
    turn = ParsedTurn(content="".join(pieces).strip())
    _sort_results(turn, results, known_tools)
    return turn


def native_tool_calls(
    calls: Sequence[ToolCall], *, content: str = "", known_tools: Collection[str] | None = None
) -> ParsedTurn:
    """Validate tool calls a backend already parsed (OpenAI `tool_calls`). Never raises.

    Native calls keep their ids so that results can answer them; a call without an id gets
    `call_<i>`. Names are checked like Hermes calls.
    """
    results: list[ToolCall | MalformedCall] = []
    for i, call in enumerate(calls):
        call_id = clean_text(call.id) or f"call_{i}"
        if not call.name or not call.name.strip():
            results.append(
                MalformedCall(
                    kind="missing_name",
                    message="the tool call has no name",
                    raw=_clip(clean_text(str(call))),
                    id=call_id,
                )
            )
            continue
        try:
            arguments = _clean_value(dict(call.arguments))
        except _TooDeep:
            results.append(
                MalformedCall(
                    kind="bad_arguments",
                    message=f"arguments nested more than {_MAX_DEPTH} levels deep",
                    name=clean_text(call.name),
                    id=call_id,
                )
            )
            continue
        results.append(ToolCall(id=call_id, name=clean_text(call.name.strip()), arguments=arguments))
    turn = ParsedTurn(content=clean_text(content or "").strip())
    _sort_results(turn, results, known_tools)
    return turn


def _sort_results(
    turn: ParsedTurn, results: list[ToolCall | MalformedCall], known_tools: Collection[str] | None
) -> None:
    for item in results:
        turn.order.append(item.id)
        if isinstance(item, ToolCall) and known_tools is not None and item.name not in known_tools:
            turn.errors.append(
                MalformedCall(
                    kind="unknown_tool",
                    message=f"there is no tool named {item.name!r}; available: "
                    + (", ".join(sorted(known_tools)) or "none"),
                    raw=_clip(json.dumps({"name": item.name, "arguments": item.arguments}, default=str)),
                    name=item.name,
                    id=item.id,
                )
            )
        elif isinstance(item, ToolCall):
            turn.calls.append(item)
        else:
            turn.errors.append(item)
