"""Constrained decoding with xgrammar for the local backend: JSON schemas and tool calls.

A `GrammarCache` compiles each distinct schema (or tool list) once per tokenizer (xgrammar
compilation takes from milliseconds to a second) and hands out fresh `GrammarMatcher`s, one per
generated row. The decode loop asks each matcher for the allowed-token bitmask before sampling
and feeds it the sampled token; once a JSON value is complete the grammar only admits a stop
token, so constrained rows end on their own.

Tool-call grammars are xgrammar structural tags: text is free until the model writes
`<tool_call>`; from there it must write one of the given tools' names and then arguments that
satisfy that tool's schema, in the exact Hermes form the chat template and the SFT targets use
(`arena.episode.parser.call_block`), after which text is free again.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from typing import Any

import structlog

from arena.episode.parser import CALL_BLOCK_END, OPEN_TAG, call_block_begin
from arena.types import ToolSpec
from simulate.model_errors import ModelRequestError

log = structlog.get_logger(__name__)


def _import_xgrammar() -> Any:
    try:
        import xgrammar
    except ImportError as exc:  # pragma: no cover - xgrammar is a declared dependency
        raise ModelRequestError(
            "JSON-schema constrained output needs xgrammar: `pip install xgrammar`"
        ) from exc
    return xgrammar


class GrammarCache:
    """Compiled JSON-schema grammars for one tokenizer, keyed by the schema's canonical JSON."""

    def __init__(
        self, tokenizer: Any, *, vocab_size: int, stop_token_ids: list[int], max_entries: int = 512
    ) -> None:
        self._tokenizer = tokenizer
        self._vocab_size = vocab_size
        self._stop_token_ids = stop_token_ids
        self._compiler: Any = None
        # Least recently used first; bounded because every task's tool view is its own grammar
        # and a daemon sees new tool sets for weeks.
        self._compiled: OrderedDict[str, Any] = OrderedDict()
        self._max_entries = max_entries
        # Compilation may be requested from several worker threads at once.
        self._lock = threading.Lock()

    @property
    def vocab_size(self) -> int:
        """Width of the token bitmask (the model's vocabulary, which may exceed the tokenizer's)."""
        return self._vocab_size

    def _get_compiler(self) -> Any:
        if self._compiler is None:
            xgr = _import_xgrammar()
            info = xgr.TokenizerInfo.from_huggingface(
                self._tokenizer, vocab_size=self._vocab_size, stop_token_ids=self._stop_token_ids
            )
            self._compiler = xgr.GrammarCompiler(info)
        return self._compiler

    def compile(self, schema: dict[str, Any]) -> Any:
        """The compiled grammar for `schema`; `ModelRequestError` if xgrammar rejects the schema."""
        if not isinstance(schema, dict):
            raise ModelRequestError(f"json_schema must be a JSON object, got {type(schema).__name__}")
        # Property order matters (the grammar emits properties in schema order), so no sort_keys.
        key = json.dumps(schema, separators=(",", ":"))
        # Compact JSON (no free whitespace): small models otherwise loop on spaces/newlines.
        return self._cached(
            "schema:" + key,
            lambda compiler: compiler.compile_json_schema(key, any_whitespace=False),
            what="json_schema",
        )

    def compile_tool_calls(self, tools: list[ToolSpec], *, required: bool = False) -> Any:
        """The grammar of free text with schema-valid Hermes calls of `tools`.

        `required`: the output must hold at least one call. A tool whose parameter schema
        xgrammar cannot compile gets any JSON object as its arguments (logged).
        """
        if not tools:
            raise ModelRequestError("constrained tool calls need at least one tool")
        spec = json.dumps([required, [[t.name, t.parameters] for t in tools]], separators=(",", ":"))
        return self._cached(
            "tools:" + spec,
            lambda compiler: compiler.compile_structural_tag(_tool_call_tag(tools, required)),
            what="tool schemas",
        )

    def _cached(self, key: str, build: Any, *, what: str) -> Any:
        with self._lock:
            compiled = self._compiled.get(key)
            if compiled is not None:
                self._compiled.move_to_end(key)
                return compiled
            try:
                compiled = build(self._get_compiler())
            except ModelRequestError:
                raise
            except Exception as exc:
                raise ModelRequestError(f"invalid {what}: {exc}") from exc
            self._compiled[key] = compiled
            while len(self._compiled) > self._max_entries:
                self._compiled.popitem(last=False)
            log.debug("grammar.compiled", key_chars=len(key), cached=len(self._compiled))
            return compiled

    @staticmethod
    def matcher(compiled: Any) -> Any:
        """A fresh matcher (one generated row) for a compiled grammar."""
        return _import_xgrammar().GrammarMatcher(compiled)


def _arguments_ebnf(tool: ToolSpec) -> str:
    """EBNF for `tool`'s arguments object, written the way `json.dumps` writes it.

    The separators match the SFT targets and the chat template (", " and ": "). Properties come in
    schema order: xgrammar's any-order mode drops `required` and admits repeated keys, so the SFT
    targets write arguments in schema order too (`arena.episode.parser.in_schema_order`).
    """
    xgr = _import_xgrammar()
    try:
        grammar = xgr.Grammar.from_json_schema(
            json.dumps(tool.parameters), any_whitespace=False, separators=(", ", ": ")
        )
    except Exception as exc:
        # One odd schema (a keyword xgrammar does not know) must not fail every episode of its
        # environment: that tool's arguments are only held to be a JSON object, and the tool
        # still validates them when called.
        log.warning("grammar.tool_schema_unsupported", tool=tool.name, error=str(exc)[:200])
        grammar = xgr.Grammar.from_json_schema(
            json.dumps({"type": "object"}), any_whitespace=False, separators=(", ", ": ")
        )
    return str(grammar)


def _tool_call_tag(tools: list[ToolSpec], required: bool) -> Any:
    """The xgrammar structural tag: free text, and after `<tool_call>` one schema-valid call."""
    from xgrammar.structural_tag import GrammarFormat, StructuralTag, TagFormat, TriggeredTagsFormat

    tags = [
        TagFormat(
            begin=call_block_begin(tool.name),
            content=GrammarFormat(grammar=_arguments_ebnf(tool)),
            end=CALL_BLOCK_END,
        )
        for tool in tools
    ]
    return StructuralTag(format=TriggeredTagsFormat(triggers=[OPEN_TAG], tags=tags, at_least_one=required))


class RowMasks:
    """Applies the grammar bitmasks of the constrained rows of a batch to its logits."""

    def __init__(self, vocab_size: int, batch_size: int) -> None:
        self._xgr = _import_xgrammar()
        self._vocab_size = vocab_size
        self._bitmask = self._xgr.allocate_token_bitmask(batch_size, vocab_size)

    def apply(self, logits: Any, matchers: dict[int, Any]) -> None:
        """Mask `logits` in place: row `i` may only take tokens `matchers[i]` allows."""
        if not matchers:
            return
        rows = sorted(matchers)
        for i in rows:
            matchers[i].fill_next_token_bitmask(self._bitmask, i)
        bitmask = self._bitmask[: logits.shape[0]].to(logits.device)
        self._xgr.apply_token_bitmask_inplace(logits, bitmask, vocab_size=self._vocab_size, indices=rows)
