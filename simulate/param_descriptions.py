"""Descriptions for the parameters an imported tool left undescribed.

Most published MCP servers derive their input schemas from typed function signatures, so their
parameters have a type and a title but no description, and the quality filter
(`simulate.simulators.quality`) would drop every such tool. Before the filter runs,
`fill_missing_descriptions` writes one for each parameter that lacks it:

- the helper model (any `ChatModel`) writes it from the tool's name and description and the
  parameter's name and JSON schema, with a grammar-constrained answer (`{"description": TEXT}`,
  printable ASCII, at most `MAX_CHARS` characters), so even the embedded 135M model answers with
  valid JSON;
- when the helper's text is unusable (the call fails, the answer is not that JSON, or its text is
  empty, too short, a placeholder, degenerate or cut off mid-sentence), or no helper is given, a description derived
  deterministically from the name and the schema stands in, e.g.
  `repo_path (string): the repo path`.

Every written description records which of the two wrote it (`GeneratedParam.by`); the importer
stores that on the tool in tools.json (`x-arena-generated`), and `generated_marks` reads it back.
A parameter with the same name and schema in several tools is asked about once (the first tool's
context) and gets the same text everywhere. Tools the filter drops for another reason (a short
tool description, a bad name) get the fallback without a helper call, so their drop reasons name
only what is really wrong.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import anyio
import structlog

from arena.protocols import ChatModel, ModelError
from arena.types import Message, SamplingParams
from simulate.importers import GENERATED_KEY, GeneratedParam, ImportedTool
from simulate.simulators.quality import PLACEHOLDER_TEXT, assess_tool

log = structlog.get_logger(__name__)

MAX_CHARS = 120  # of a written description
MIN_CHARS = 3  # a shorter description counts as missing (the quality filter's rule)
# Printable ASCII without quotes or backslashes; the length sits in the pattern because xgrammar
# ignores `maxLength` beside a `pattern`.
ANSWER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"description": {"type": "string", "pattern": f"[ !#-\\[\\]-~]{{0,{MAX_CHARS}}}"}},
    "required": ["description"],
    "additionalProperties": False,
}
SYSTEM = (
    "You document the parameters of software tools. Given a tool and one of its parameters, write "
    "one short sentence saying what value the caller passes in that parameter. "
    'Answer with JSON only: {"description": "..."}'
)
# Two worked examples (one required, one optional with a default): the 135M model copies the form.
EXAMPLES = (
    (
        "Tool: send_email - Sends an email message to one recipient.\n"
        "Parameter: recipient (string, required)\n"
        'Its JSON schema: {"title": "Recipient", "type": "string"}',
        '{"description": "The email address of the person who receives the message."}',
    ),
    (
        "Tool: list_orders - Lists the orders of the signed-in customer.\n"
        "Parameter: page_size (integer, optional, default 20)\n"
        'Its JSON schema: {"default": 20, "title": "Page Size", "type": "integer"}',
        '{"description": "How many orders to return per page."}',
    ),
)
# An answer ending on one of these words is an unfinished sentence ("The status of the repo is").
_DANGLING = {"a", "an", "the", "is", "are", "of", "to", "for", "and", "or", "with", "in", "on", "by", "that"}
_PLACEHOLDER_FILL = "a description long enough for the filter"


def needs_description(prop: Any) -> bool:
    """Whether a parameter schema lacks a usable description (the quality filter's rule)."""
    if not isinstance(prop, dict):
        return False  # no schema at all: nothing to describe, the filter drops the tool
    desc = prop.get("description")
    return not isinstance(desc, str) or len(desc.strip()) < MIN_CHARS


def _properties(tool: ImportedTool) -> dict[str, Any]:
    props = (tool.input_schema or {}).get("properties")
    return props if isinstance(props, dict) else {}


def missing_parameters(tool: ImportedTool) -> list[str]:
    """The names of `tool`'s parameters that need a description, in schema order."""
    return [name for name, prop in _properties(tool).items() if needs_description(prop)]


def _doomed(tool: ImportedTool) -> bool:
    """Whether the filter drops `tool` for a reason other than missing parameter descriptions."""
    if tool.problem:
        return True
    schema = copy.deepcopy(tool.input_schema or {})
    for name in missing_parameters(tool):
        schema["properties"][name]["description"] = _PLACEHOLDER_FILL
    probe = ImportedTool(name=tool.name, description=tool.description, input_schema=schema)
    return not assess_tool(probe.spec()).ok


def needs_helper(tools: list[ImportedTool]) -> bool:
    """Whether any usable tool lacks a parameter description (the helper has work to do)."""
    return any(missing_parameters(t) and not _doomed(t) for t in tools)


def type_words(prop: dict[str, Any]) -> str:
    """A parameter's type in words: `string`, `array of string`, `string or null`, `enum`."""
    if "enum" in prop and isinstance(prop["enum"], list):
        return "enum"
    if "const" in prop:
        return "constant"
    kind = prop.get("type")
    if isinstance(kind, list):
        return " or ".join(str(k) for k in kind)
    if kind == "array" and isinstance(prop.get("items"), dict) and "type" in prop["items"]:
        return f"array of {type_words(prop['items'])}"
    if isinstance(kind, str):
        return kind
    for key in ("anyOf", "oneOf"):
        options = prop.get(key)
        if isinstance(options, list) and options:
            return " or ".join(type_words(o) if isinstance(o, dict) else "any" for o in options)
    return "any"


def _name_words(name: str) -> list[str]:
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", name)
    return [w.lower() for w in re.findall(r"[A-Za-z]+", spaced)]


def _ascii(text: str) -> str:
    return re.sub(r"[^ -~]", "", text).strip()


def _summary(prop: dict[str, Any], required: bool) -> str:
    """`string, required`, `integer, optional, default 3`, `enum, required, one of "a", "b"`."""
    parts = [type_words(prop), "required" if required else "optional"]
    if "default" in prop and prop["default"] is not None:
        parts.append(f"default {_ascii(json.dumps(prop['default']))[:30]}")
    if isinstance(prop.get("enum"), list):
        parts.append("one of " + ", ".join(_ascii(json.dumps(v)) for v in prop["enum"][:6]))
    return ", ".join(parts)


def fallback_description(name: str, prop: dict[str, Any], *, required: bool = True) -> str:
    """A description from the name and schema alone: `repo_path (string): the repo path`."""
    title = prop.get("title") if isinstance(prop.get("title"), str) else ""
    words = " ".join(_name_words(_ascii(title) or name)) or "value"
    kind = type_words(prop) + ("" if required else ", optional")
    text = f"{_ascii(name) or 'parameter'} ({kind}): the {words}"
    if "default" in prop and prop["default"] is not None:
        text += f"; default {_ascii(json.dumps(prop['default']))[:30]}"
    if isinstance(prop.get("enum"), list):
        text += "; one of " + ", ".join(_ascii(json.dumps(v)) for v in prop["enum"][:6])
    return text[:MAX_CHARS].rstrip()


def unusable_reason(text: str, name: str) -> str | None:
    """Why a helper-written description cannot stand (None: it can)."""
    text = text.strip()
    if not text:
        return "empty answer"
    if not text.isascii() or not text.isprintable():
        return "not printable ASCII"
    if len(text) > MAX_CHARS:
        return f"longer than {MAX_CHARS} characters"
    if text.lower().strip(" .") in PLACEHOLDER_TEXT:
        return "a placeholder"
    text_words = [w.lower() for w in re.findall(r"[A-Za-z]+", text)]
    if len(text) < 10 or len(text_words) < 3:
        return "too short (needs 10+ characters, 3+ words)"
    if re.search(r"(.)\1{5}", text) or re.search(r"\b(\w+)(\W+\1\b){2}", text, re.IGNORECASE):
        return "degenerate (a character or word repeated over and over)"
    if text_words[-1] in _DANGLING and not text.endswith("."):
        return "an unfinished sentence"
    if text_words == _name_words(name):
        return "only the parameter's name"
    return None


def _question(tool: ImportedTool, name: str, prop: dict[str, Any], required: bool) -> str:
    about = _ascii(tool.description).splitlines()[0][:300] if _ascii(tool.description) else "(none)"
    schema = _ascii(json.dumps({k: v for k, v in prop.items() if k != "description"}))[:300]
    return (
        f"Tool: {tool.name} - {about}\n"
        f"Parameter: {name} ({_summary(prop, required)})\n"
        f"Its JSON schema: {schema}"
    )


async def describe_with_helper(
    helper: ChatModel,
    tool: ImportedTool,
    name: str,
    prop: dict[str, Any],
    *,
    required: bool,
    max_tokens: int = 64,
) -> tuple[str | None, str | None]:
    """(the helper's description, None), or (None, why it is unusable)."""
    messages = [Message(role="system", content=SYSTEM)]
    for question, answer in EXAMPLES:
        messages += [Message(role="user", content=question), Message(role="assistant", content=answer)]
    messages.append(Message(role="user", content=_question(tool, name, prop, required)))
    params = SamplingParams(max_tokens=max_tokens, temperature=0.0, json_schema=ANSWER_SCHEMA)
    try:
        completion = await helper.chat(messages, params=params)
    except ModelError as exc:
        return None, f"the helper failed: {str(exc)[:160]}"
    except Exception as exc:  # any other fault of a helper: the fallback stands in, the import goes on
        log.warning("import.helper_failed", tool=tool.name, parameter=name, error=repr(exc)[:200])
        return None, f"the helper failed: {type(exc).__name__}: {str(exc)[:120]}"
    try:
        data = json.loads(completion.text)
        text = data["description"]
        if not isinstance(text, str):
            raise TypeError("description is not a string")
    except (ValueError, KeyError, TypeError) as exc:
        cut = " (cut off)" if completion.finish_reason == "length" else ""
        return None, f"the helper's answer is not the JSON asked for{cut}: {str(exc)[:120]}"
    text = " ".join(text.split())
    why = unusable_reason(text, name)
    return (None, f"the helper's text {text[:60]!r} is {why}") if why else (text, None)


def _key(name: str, prop: dict[str, Any], required: bool) -> str:
    return json.dumps([name, prop, required], sort_keys=True, default=str)


async def fill_missing_descriptions(
    tools: list[ImportedTool],
    helper: ChatModel | None,
    *,
    concurrency: int = 8,
    max_tokens: int = 64,
) -> list[GeneratedParam]:
    """Write a description into every parameter of `tools` that lacks one; returns what was written.

    The tools' schemas are updated in place (each written parameter is also appended to the
    tool's `generated`). `helper` None: the deterministic fallback writes every description.
    Concurrent helper calls (`concurrency`) batch on a local model.
    """
    todo: list[tuple[ImportedTool, str, dict[str, Any], bool, bool]] = []
    for tool in tools:
        missing = missing_parameters(tool)
        if not missing or tool.problem:
            continue
        tool.input_schema = copy.deepcopy(tool.input_schema or {})
        required = set(tool.input_schema.get("required") or [])
        doomed = _doomed(tool)
        for name in missing:
            todo.append((tool, name, tool.input_schema["properties"][name], name in required, doomed))

    answers: dict[str, tuple[str | None, str | None]] = {}
    asks: dict[str, tuple[ImportedTool, str, dict[str, Any], bool]] = {}
    for tool, name, prop, required, doomed in todo:  # one question per distinct parameter
        if not doomed:
            asks.setdefault(_key(name, prop, required), (tool, name, prop, required))
    if helper is not None and asks:
        limiter = anyio.CapacityLimiter(max(1, concurrency))

        async def ask(key: str, tool: ImportedTool, name: str, prop: dict[str, Any], required: bool) -> None:
            async with limiter:
                answers[key] = await describe_with_helper(
                    helper, tool, name, prop, required=required, max_tokens=max_tokens
                )

        async with anyio.create_task_group() as tg:
            for key, (tool, name, prop, required) in asks.items():
                tg.start_soon(ask, key, tool, name, prop, required)

    out: list[GeneratedParam] = []
    for tool, name, prop, required, doomed in todo:
        if doomed:
            text, why = None, "the tool is dropped for another reason; the helper was not asked"
        elif helper is None:
            text, why = None, "no helper model"
        else:
            text, why = answers[_key(name, prop, required)]
        generated = GeneratedParam(
            tool=tool.name,
            parameter=name,
            text=text or fallback_description(name, prop, required=required),
            by="helper" if text else "fallback",
            model=getattr(helper, "name", None) if text else None,
            why=why,
        )
        prop["description"] = generated.text
        tool.generated.append(generated)
        out.append(generated)
    log.info(
        "import.descriptions_written",
        helper=getattr(helper, "name", None),
        asked=len(answers),
        by_helper=sum(g.by == "helper" for g in out),
        by_fallback=sum(g.by == "fallback" for g in out),
    )
    return out


def generated_marks(folder: Path) -> dict[str, dict[str, str]]:
    """`{tool: {parameter: "helper" | "fallback"}}` from a simulated environment's tools.json.

    Reads the `x-arena-generated` lists the importer wrote; a folder without tools.json, or a
    file that cannot be read, has none.
    """
    try:
        data = json.loads((folder / "tools.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return {}
    entries = data.get("tools", []) if isinstance(data, dict) else data
    out: dict[str, dict[str, str]] = {}
    for entry in entries if isinstance(entries, list) else []:
        if not isinstance(entry, dict):
            continue
        if entry.get("type") == "function" and isinstance(entry.get("function"), dict):
            entry = entry["function"]
        marks = entry.get(GENERATED_KEY)
        if not isinstance(entry.get("name"), str) or not isinstance(marks, list):
            continue
        for mark in marks:
            if isinstance(mark, dict) and isinstance(mark.get("parameter"), str):
                out.setdefault(entry["name"], {})[mark["parameter"]] = str(mark.get("by", "generated"))
    return out
