"""The agent's tool schemas of a τ² domain, read from its `tools.py` with `ast` (τ² is never imported).

τ² shows the agent each `@is_tool` method of the domain's toolkit as an OpenAI function: the
docstring's first line, a blank line and the rest of its description; the parameters as the JSON
schema pydantic generates for a model made of the method's signature (annotations, defaults) and
the descriptions of the docstring's `Args:` section. The schema is rebuilt here from the source:
builtin and `typing` types, the domain's type aliases (`Literal[...]` and the like) and its pydantic
classes from `data_model.py` (as `$defs`), then ordered as pydantic orders keys, so the result is
τ²'s text. What cannot be resolved (a type imported from elsewhere) becomes an untyped parameter,
and a note says so.
"""

from __future__ import annotations

import ast
import inspect
import re
from dataclasses import dataclass, field
from typing import Any

from arena.public.tau2.type_schema import SchemaBuilder, SchemaError, Symbols, last_name, pydantic_order
from arena.types import ToolSpec

_SECTIONS = (
    "Arguments", "Args", "Parameters", "Params", "Raises", "Exceptions", "Except",
    "Attributes", "Example", "Examples", "Returns", "Yields",
)  # fmt: skip
_PARAM_SECTIONS = {"Arguments", "Args", "Parameters", "Params"}
_TITLE = re.compile(r"^(" + "|".join(_SECTIONS) + r"):[ \t\r\f\v]*$", re.M)
_TYPED_ARG = re.compile(r"\s*(.+?)\s*\(\s*(.*[^\s]+)\s*\)")


class ToolDocError(ValueError):
    """The tools module cannot be read (a syntax error, no tools)."""


@dataclass
class Docstring:
    """A Google-style docstring as τ²'s docstring parser splits it."""

    short: str = ""
    long: str = ""
    params: dict[str, tuple[str | None, str]] = field(default_factory=dict)  # name -> (type, text)

    @property
    def description(self) -> str:
        """The tool's description as τ² shows it: first line, a blank line, the rest."""
        return f"{self.short}\n\n{self.long}" if self.long else self.short


def parse_docstring(text: str | None) -> Docstring:
    """Split a docstring: first line, the rest of the description, the `Args:` entries."""
    if not text:
        return Docstring()
    text = inspect.cleandoc(text)
    first = _TITLE.search(text)
    desc, meta = (text[: first.start()], text[first.start() :]) if first else (text, "")
    short, _, rest = desc.partition("\n")
    out = Docstring(short=short, long=rest.strip())
    titles = list(_TITLE.finditer(meta))
    for i, title in enumerate(titles):
        if title.group(1) not in _PARAM_SECTIONS:
            continue
        end = titles[i + 1].start() if i + 1 < len(titles) else len(meta)
        chunk = meta[title.end() : end]
        unindented = re.search(r"\n\S", chunk)  # a line at the margin ends the section
        chunk = (chunk[: unindented.start()] if unindented else chunk).strip("\n")
        indent = re.match(r"\s*", chunk).group()  # type: ignore[union-attr]
        starts = [m.end() for m in re.finditer("^" + re.escape(indent) + r"(?=\S)", chunk, re.M)]
        for j, start in enumerate(starts):
            stop = starts[j + 1] - len(indent) if j + 1 < len(starts) else len(chunk)
            entry = chunk[start:stop].strip("\n")
            if ":" not in entry:
                continue
            before, text_ = entry.split(":", 1)
            if "\n" in before:
                head, tail = before.split("\n", 1)
                before = head + inspect.cleandoc(tail)
            if text_.startswith(" "):
                text_ = text_[1:]
            if "\n" in text_:
                head, tail = text_.split("\n", 1)
                text_ = head + "\n" + inspect.cleandoc(tail)
            typed = _TYPED_ARG.match(before)
            name, type_name = (typed.group(1), typed.group(2)) if typed else (before, None)
            out.params[name] = (type_name, text_.strip("\n"))
    return out


def _is_tool(decorator: ast.expr) -> bool:
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    return last_name(target) == "is_tool"


def _tool(fn: ast.FunctionDef | ast.AsyncFunctionDef, symbols: Symbols) -> tuple[ToolSpec, list[str]]:
    doc = parse_docstring(ast.get_docstring(fn, clean=False))
    builder = SchemaBuilder(symbols)
    positional = [*fn.args.posonlyargs, *fn.args.args]
    defaults: list[ast.expr | None] = [None] * (len(positional) - len(fn.args.defaults))
    params = list(zip(positional, [*defaults, *fn.args.defaults], strict=True))
    params += list(zip(fn.args.kwonlyargs, fn.args.kw_defaults, strict=True))
    if params and params[0][0].arg in ("self", "cls"):
        params = params[1:]
    properties: dict[str, Any] = {}
    required: list[str] = []
    for arg, default in params:
        type_name, text = doc.params.get(arg.arg, (None, None))
        annotation = arg.annotation
        if annotation is None and type_name:  # τ² takes the docstring's type then
            annotation = ast.Constant(type_name)
        prop, is_required = builder.field(arg.arg, annotation, default, text)
        properties[arg.arg] = prop
        if is_required:
            required.append(arg.arg)
    parameters: dict[str, Any] = {"properties": properties, "title": "parameters", "type": "object"}
    if required:
        parameters["required"] = required
    if builder.defs:
        parameters["$defs"] = builder.defs
    spec = ToolSpec(
        name=fn.name, description=doc.description or fn.name, parameters=pydantic_order(parameters)
    )
    return spec, [f"{fn.name}: {note}" for note in builder.notes]


def tool_specs(tools_source: str, data_model_source: str | None = None) -> tuple[list[ToolSpec], list[str]]:
    """The `@is_tool` methods of a domain's tools module as tool schemas, in definition order.

    Returns the schemas and notes on what could not be typed. Raises `ToolDocError` when the
    source does not parse or defines no tool.
    """
    try:
        module = ast.parse(tools_source)
        symbols = Symbols([data_model_source or "", tools_source])
    except SyntaxError as exc:
        raise ToolDocError(f"does not parse: {exc.msg} (line {exc.lineno})") from None
    specs: list[ToolSpec] = []
    notes: list[str] = []
    seen: set[str] = set()
    for cls in (n for n in module.body if isinstance(n, ast.ClassDef)):
        for fn in cls.body:
            if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef) and any(
                _is_tool(d) for d in fn.decorator_list
            ):
                if fn.name in seen:
                    continue
                seen.add(fn.name)
                try:
                    spec, tool_notes = _tool(fn, symbols)
                except SchemaError as exc:
                    raise ToolDocError(f"tool {fn.name}: {exc}") from None
                specs.append(spec)
                notes.extend(tool_notes)
    if not specs:
        raise ToolDocError("defines no @is_tool method")
    return specs, notes
