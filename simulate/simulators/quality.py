"""The tool quality filter for imported tools: deterministic rules, each failure with a reason.

A simulated tool is only as good as what the helper model can read from its definition, so an
imported tool is kept only when

- its name is meaningful: at least 3 characters, contains a word of 3+ letters, and is not a
  generic placeholder (`tool`, `test`, `foo`, `func1`, ...);
- its description is informative: at least 20 characters and 4 words, not just the name
  repeated, not a placeholder (`TODO`, `description`, `n/a`);
- its parameters are described: the schema is an object, and every parameter has a type (or
  enum/anyOf/oneOf/$ref) and a description of at least 3 characters, and at most 25 parameters.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel

from arena.types import ToolSpec

GENERIC_NAMES = {
    "tool",
    "tools",
    "func",
    "function",
    "test",
    "tests",
    "foo",
    "bar",
    "baz",
    "qux",
    "run",
    "do",
    "call",
    "execute",
    "exec",
    "action",
    "method",
    "handler",
    "main",
    "api",
    "endpoint",
    "misc",
    "untitled",
    "unnamed",
    "noop",
    "dummy",
    "example",
    "sample",
    "temp",
    "tmp",
    "new_tool",
}
PLACEHOLDER_TEXT = {"todo", "tbd", "description", "n/a", "na", "none", "null", "placeholder", "fixme", "..."}
MAX_PARAMETERS = 25


class ToolQuality(BaseModel):
    """The filter's decision on one tool."""

    name: str
    ok: bool
    reasons: list[str]


def _words(text: str) -> list[str]:
    return re.findall(r"[A-Za-z]+", text)


def _name_reasons(name: str) -> list[str]:
    base = re.sub(r"[\d_\-]+$", "", name.lower())
    if len(name) < 3:
        return [f"name {name!r} is too short to mean anything"]
    if name.lower() in GENERIC_NAMES or base in GENERIC_NAMES:
        return [f"name {name!r} is a generic placeholder"]
    parts = re.findall(r"[a-z]+|[A-Z][a-z]*", name)
    if not any(len(p) >= 3 for p in parts):
        return [f"name {name!r} has no meaningful word"]
    return []


def _description_reasons(name: str, description: str) -> list[str]:
    text = description.strip()
    if not text:
        return ["no description"]
    if text.lower().strip(" .") in PLACEHOLDER_TEXT:
        return [f"description {text!r} is a placeholder"]
    words = _words(text)
    if len(text) < 20 or len(words) < 4:
        return [f"description {text!r} is too short to say what the tool does (needs 20+ chars, 4+ words)"]
    name_words = {w.lower() for w in re.findall(r"[a-z]+|[A-Z][a-z]*", name)}
    if {w.lower() for w in words} <= name_words | {"a", "an", "the", "to", "of", "for"}:
        return ["description only repeats the name"]
    return []


def _parameter_reasons(schema: Any) -> list[str]:
    if not isinstance(schema, dict) or schema.get("type", "object") != "object":
        return ["parameter schema is not an object"]
    props = schema.get("properties") or {}
    if not isinstance(props, dict):
        return ["parameter schema's properties is not an object"]
    reasons = []
    if len(props) > MAX_PARAMETERS:
        reasons.append(f"{len(props)} parameters (more than {MAX_PARAMETERS})")
    for pname, prop in props.items():
        if not isinstance(prop, dict):
            reasons.append(f"parameter {pname!r} has no schema")
            continue
        if not any(k in prop for k in ("type", "enum", "anyOf", "oneOf", "$ref", "const")):
            reasons.append(f"parameter {pname!r} has no type")
        desc = prop.get("description")
        if not isinstance(desc, str) or len(desc.strip()) < 3:
            reasons.append(f"parameter {pname!r} has no description")
    return reasons


def assess_tool(spec: ToolSpec) -> ToolQuality:
    """Apply every rule to one tool."""
    reasons = [
        *_name_reasons(spec.name),
        *_description_reasons(spec.name, spec.description),
        *_parameter_reasons(spec.parameters),
    ]
    return ToolQuality(name=spec.name, ok=not reasons, reasons=reasons)


def filter_tools(specs: list[ToolSpec]) -> tuple[list[ToolSpec], list[ToolQuality]]:
    """The tools that pass, and the dropped ones with their reasons."""
    kept: list[ToolSpec] = []
    dropped: list[ToolQuality] = []
    for spec in specs:
        quality = assess_tool(spec)
        if quality.ok:
            kept.append(spec)
        else:
            dropped.append(quality)
    return kept, dropped
