"""The `@tool` decorator: a typed Python function becomes a tool with a JSON schema.

The schema comes from the type hints (required vs optional by default value, `Literal` enums,
lists, nested pydantic models) and from the Google-style docstring (summary and `Args:`).
Arguments are validated against the same pydantic model before the function runs, so a wrong
type becomes a clean error observation instead of an exception inside the tool.
"""

from __future__ import annotations

import contextlib
import contextvars
import inspect
import re
import types
import typing
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal, get_args, get_origin

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from arena.types import ToolSpec

_SCALARS = (str, int, float, bool)


class ToolError(Exception):
    """A failure the agent should see as an error observation (never a traceback)."""


class ToolDefinitionError(ValueError):
    """A tool function cannot become a tool (missing hints or docstring, unsupported type, ...)."""


@dataclass
class ToolCollection:
    """What `@tool` produced while a tools file was imported under `collect_tools()`.

    `tools` keeps every tool in definition order (duplicates included, so the loader can report
    them); `errors` pairs each failed definition with its function's first line.
    """

    tools: list[ToolDef] = field(default_factory=list)
    errors: list[tuple[ToolDefinitionError, Callable[..., Any]]] = field(default_factory=list)


_collector: contextvars.ContextVar[ToolCollection | None] = contextvars.ContextVar(
    "arena_tool_collector", default=None
)


@contextlib.contextmanager
def collect_tools() -> Iterator[ToolCollection]:
    """Record every `@tool` definition made inside the block instead of raising on the first bad one.

    The environment loader imports a `tools.py` under this so that it can report every broken tool
    of a file at once, and see duplicates that a module namespace would silently overwrite.
    """
    collection = ToolCollection()
    token = _collector.set(collection)
    try:
        yield collection
    finally:
        _collector.reset(token)


def _define(fn: Callable[..., Any], *, writes: bool, name: str | None) -> Any:
    collection = _collector.get()
    if collection is None:
        return ToolDef(fn, writes=writes, name=name)
    try:
        td = ToolDef(fn, writes=writes, name=name)
    except ToolDefinitionError as exc:
        collection.errors.append((exc, fn))
        return fn  # keep importing the file so that later problems are found too
    collection.tools.append(td)
    return td


@dataclass(frozen=True)
class DocString:
    """The parts of a Google-style docstring a tool schema needs."""

    summary: str
    args: dict[str, str] = field(default_factory=dict)


def parse_docstring(doc: str | None) -> DocString:
    """Parse a Google-style docstring: the text before the first section, and the `Args:` entries."""
    text = inspect.cleandoc(doc or "")
    lines = text.splitlines()
    summary_lines: list[str] = []
    args: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    for line in lines:
        header = re.fullmatch(r"(Args|Arguments|Parameters|Returns|Raises|Yields|Examples?|Notes?):\s*", line)
        if header:
            section = header.group(1)
            current = None
            continue
        if section is None:
            summary_lines.append(line)
        elif section in ("Args", "Arguments", "Parameters"):
            entry = re.match(r"^\s{2,}(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$", line)
            if entry and (current is None or _indent(line) <= _indent_of_first_arg(lines, section)):
                current = entry.group(1).lstrip("*")
                args[current] = entry.group(2).strip()
            elif current is not None and line.strip():
                args[current] = (args[current] + " " + line.strip()).strip()
    summary = "\n".join(summary_lines).strip()
    return DocString(summary=summary, args=args)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _indent_of_first_arg(lines: list[str], section: str) -> int:
    seen = False
    for line in lines:
        if line.strip().startswith(f"{section}:"):
            seen = True
            continue
        if seen and line.strip():
            return _indent(line)
    return 4


def _check_type(annotation: Any, where: str) -> None:
    """Reject parameter types that have no faithful JSON-schema form."""
    if annotation in _SCALARS or annotation is type(None) or annotation is Any:
        return
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return
    origin = get_origin(annotation)
    if origin is Literal:
        if not all(isinstance(v, _SCALARS) for v in get_args(annotation)):
            raise ToolDefinitionError(f"{where}: Literal values must be str, int, float or bool")
        return
    if origin in (list, tuple, set, frozenset, typing.Union, types.UnionType, dict):
        for arg in get_args(annotation):
            if arg is not Ellipsis:
                _check_type(arg, where)
        return
    if origin is typing.Annotated:
        _check_type(get_args(annotation)[0], where)
        return
    raise ToolDefinitionError(f"{where}: unsupported parameter type {annotation!r}")


def _strip_titles(schema: Any) -> Any:
    """Drop pydantic's auto-generated `title` keys: they are noise in a tool schema."""
    if isinstance(schema, dict):
        # A property *named* "title" maps to a dict and is kept; only the string labels go.
        return {k: _strip_titles(v) for k, v in schema.items() if not (k == "title" and isinstance(v, str))}
    if isinstance(schema, list):
        return [_strip_titles(v) for v in schema]
    return schema


class ToolDef:
    """A decorated tool function with its schema and argument validator."""

    def __init__(self, fn: Callable[..., Any], *, writes: bool, name: str | None = None) -> None:
        self.fn = fn
        self.writes = writes
        self.name = name or fn.__name__
        where = f"tool {self.name!r}"
        if not fn.__doc__ or not fn.__doc__.strip():
            raise ToolDefinitionError(f"{where}: missing docstring")
        self.doc = parse_docstring(fn.__doc__)
        if not self.doc.summary:
            raise ToolDefinitionError(f"{where}: the docstring has no summary line")
        try:
            hints = typing.get_type_hints(fn, include_extras=True)
        except Exception as exc:  # a NameError in an annotation, typically
            raise ToolDefinitionError(f"{where}: cannot resolve type hints: {exc}") from exc
        params = list(inspect.signature(fn).parameters.values())
        if not params:
            raise ToolDefinitionError(f"{where}: the first parameter must be the database handle")
        fields: dict[str, Any] = {}
        for p in params[1:]:
            pwhere = f"{where}, parameter {p.name!r}"
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                raise ToolDefinitionError(f"{pwhere}: *args and **kwargs are not supported")
            if p.name not in hints:
                raise ToolDefinitionError(f"{pwhere}: missing type hint")
            _check_type(hints[p.name], pwhere)
            if p.name not in self.doc.args:
                raise ToolDefinitionError(f"{pwhere}: not described in the docstring's Args section")
            default = ... if p.default is inspect.Parameter.empty else p.default
            from pydantic import Field

            fields[p.name] = (hints[p.name], Field(default, description=self.doc.args[p.name]))
        self.args_model: type[BaseModel] = create_model(  # type: ignore[call-overload]
            f"{self.name}_args",
            __config__=ConfigDict(extra="forbid"),
            **fields,
        )
        schema = _strip_titles(self.args_model.model_json_schema())
        schema.pop("additionalProperties", None)
        schema.setdefault("properties", {})
        schema.setdefault("required", [])
        self.spec = ToolSpec(name=self.name, description=self.doc.summary, parameters=schema)

    def validate(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """Validate raw JSON arguments; returns keyword arguments for the function.

        Raises `ToolError` naming every bad argument.
        """
        if not isinstance(arguments, dict):
            raise ToolError(f"arguments for {self.name} must be a JSON object")
        try:
            model = self.args_model.model_validate(arguments)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(x) for x in err['loc']) or '(arguments)'}: {err['msg']}"
                for err in exc.errors()
            )
            raise ToolError(f"invalid arguments for {self.name}: {problems}") from None
        # Keep nested pydantic models as models: the tool's hints ask for them.
        return {name: getattr(model, name) for name in type(model).model_fields}

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"ToolDef({self.name!r}, writes={self.writes})"


@typing.overload
def tool(fn: Callable[..., Any], /) -> ToolDef: ...
@typing.overload
def tool(*, writes: bool = False, name: str | None = None) -> Callable[[Callable[..., Any]], ToolDef]: ...
def tool(
    fn: Callable[..., Any] | None = None, /, *, writes: bool = False, name: str | None = None
) -> ToolDef | Callable[[Callable[..., Any]], ToolDef]:
    """Mark a function as a tool. `writes=True` for tools that change state.

    Usable bare (`@tool`) or with options (`@tool(writes=True)`).
    """
    if fn is not None:
        return _define(fn, writes=writes, name=name)

    def wrap(f: Callable[..., Any]) -> ToolDef:
        return _define(f, writes=writes, name=name)

    return wrap
