"""JSON schemas of Python type annotations, rebuilt from source with `ast` as pydantic writes them.

τ² builds each tool's parameter schema with pydantic (`create_model(...).model_json_schema()`);
`SchemaBuilder` gives the same JSON for the annotations τ²'s domains use without importing them:
builtin and `typing` types (`str`, `int`, `float`, `bool`, `list[...]`, `dict[...]`, `Optional`,
unions, `Literal`, `Annotated[..., Field(description=...)]`), the module's type aliases, and its
pydantic classes as `$defs` (fields with their descriptions and defaults, base classes' fields
first). `pydantic_order` sorts the keys as pydantic does. A name it cannot resolve becomes an
untyped schema (`{}`), and a note says so.
"""

from __future__ import annotations

import ast
from typing import Any

_PRIMITIVES = {"str": "string", "int": "integer", "float": "number", "bool": "boolean"}
_LITERAL_TYPES = {str: "string", bool: "boolean", int: "integer", float: "number"}
_MODEL_BASES = {"BaseModel", "DB"}  # where a class's fields stop being collected


class SchemaError(ValueError):
    """An annotation that cannot be turned into a schema (a type that names itself endlessly)."""


def last_name(node: ast.expr) -> str | None:
    """The name an expression ends with (`typing.List` -> `List`), or None."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _call_kwargs(call: ast.Call) -> dict[str, ast.expr]:
    return {k.arg: k.value for k in call.keywords if k.arg}


def _literal(node: ast.expr) -> tuple[bool, Any]:
    """`(True, value)` for a literal the schema can show as a default, else `(False, None)`."""
    try:
        return True, ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False, None


class Symbols:
    """The module-level type aliases and classes a schema may name."""

    def __init__(self, sources: list[str]) -> None:
        self.aliases: dict[str, ast.expr] = {}
        self.classes: dict[str, ast.ClassDef] = {}
        for source in sources:
            for node in ast.parse(source).body:
                if isinstance(node, ast.ClassDef):
                    self.classes[node.name] = node
                elif isinstance(node, ast.Assign) and len(node.targets) == 1:
                    target = node.targets[0]
                    if isinstance(target, ast.Name):
                        self.aliases[target.id] = node.value
                elif (
                    isinstance(node, ast.AnnAssign)
                    and isinstance(node.target, ast.Name)
                    and node.value is not None
                    and last_name(node.annotation) == "TypeAlias"
                ):
                    self.aliases[node.target.id] = node.value

    def is_model(self, name: str) -> bool:
        """Whether `name` is a pydantic class of the module (a `BaseModel` subclass, directly or not)."""
        seen: set[str] = set()
        while name in self.classes and name not in seen:
            seen.add(name)
            bases = [last_name(b) for b in self.classes[name].bases]
            if any(b in _MODEL_BASES for b in bases):
                return True
            name = next((b for b in bases if b in self.classes), "")
        return False


class SchemaBuilder:
    """JSON schemas of annotations, with the pydantic classes they name collected as `$defs`."""

    def __init__(self, symbols: Symbols) -> None:
        self.symbols = symbols
        self.defs: dict[str, dict[str, Any]] = {}
        self.notes: list[str] = []
        self._depth = 0

    def schema(self, node: ast.expr | None) -> dict[str, Any]:
        """The schema of one annotation (no title)."""
        if node is None:
            return {}
        self._depth += 1
        try:
            if self._depth > 50:
                raise SchemaError(f"the type {ast.unparse(node)} refers to itself")
            return self._schema(node)
        finally:
            self._depth -= 1

    def _schema(self, node: ast.expr) -> dict[str, Any]:
        if isinstance(node, ast.Constant):
            if node.value is None:
                return {"type": "null"}
            if isinstance(node.value, str):  # a forward reference
                return self.schema(ast.parse(node.value, mode="eval").body)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            return self._union(_flatten_or(node))
        if isinstance(node, ast.Subscript):
            return self._generic(node)
        name = last_name(node)
        if name in _PRIMITIVES:
            return {"type": _PRIMITIVES[name]}
        if name in ("dict", "Dict", "Mapping"):
            return {"additionalProperties": True, "type": "object"}
        if name in ("list", "List", "Sequence", "tuple", "Tuple"):
            return {"items": {}, "type": "array"}
        if name in ("set", "Set", "frozenset", "FrozenSet"):
            return {"items": {}, "type": "array", "uniqueItems": True}
        if name in ("Any", "object"):
            return {}
        if name in ("None", "NoneType"):
            return {"type": "null"}
        if name is not None and self.symbols.is_model(name):
            return self._ref(name)
        if name is not None and name in self.symbols.aliases:
            return self.schema(self.symbols.aliases[name])
        self.notes.append(f"type {ast.unparse(node)} is not defined in tools.py or data_model.py: untyped")
        return {}

    def _generic(self, node: ast.Subscript) -> dict[str, Any]:
        base = last_name(node.value)
        args = list(node.slice.elts) if isinstance(node.slice, ast.Tuple) else [node.slice]
        if base in ("List", "list", "Sequence"):
            return {"items": self.schema(args[0]), "type": "array"}
        if base in ("Set", "set", "FrozenSet", "frozenset"):
            return {"items": self.schema(args[0]), "type": "array", "uniqueItems": True}
        if base in ("Tuple", "tuple"):
            if len(args) == 2 and isinstance(args[1], ast.Constant) and args[1].value is Ellipsis:
                return {"items": self.schema(args[0]), "type": "array"}
            n = len(args)
            items = [self.schema(a) for a in args]
            return {"maxItems": n, "minItems": n, "prefixItems": items, "type": "array"}
        if base in ("Dict", "dict", "Mapping"):
            out: dict[str, Any] = {"additionalProperties": self.schema(args[1]), "type": "object"}
            keys = self.schema(args[0])
            if "enum" in keys or "const" in keys:
                out["propertyNames"] = {k: v for k, v in keys.items() if k in ("enum", "const")}
            return out
        if base == "Optional":
            return self._union([args[0], ast.Constant(None)])
        if base == "Union":
            return self._union([m for a in args for m in _flatten_or(a)])
        if base == "Literal":
            return _literal_schema([ast.literal_eval(a) for a in args])
        if base == "Annotated":
            out = self.schema(args[0])
            description = _field_description(args[1:])
            return {**out, "description": description} if description is not None else out
        self.notes.append(f"type {ast.unparse(node)} is not understood: untyped")
        return {}

    def _union(self, members: list[ast.expr]) -> dict[str, Any]:
        nullable = any(isinstance(m, ast.Constant) and m.value is None for m in members)
        rest = [m for m in members if not (isinstance(m, ast.Constant) and m.value is None)]
        schemas = [self.schema(m) for m in rest]
        out = schemas[0] if len(schemas) == 1 else {"anyOf": _flat_any(schemas)}
        return {"anyOf": _flat_any([out, {"type": "null"}])} if nullable else out

    def _ref(self, name: str) -> dict[str, Any]:
        if name not in self.defs:
            self.defs[name] = {}  # reserved first: a class may name itself
            self.defs[name] = self._model(name)
        return {"$ref": f"#/$defs/{name}"}

    def _model(self, name: str) -> dict[str, Any]:
        fields: dict[str, ast.AnnAssign] = {}
        chain, current = [], name
        while current in self.symbols.classes and current not in chain:
            chain.append(current)
            bases = [last_name(b) for b in self.symbols.classes[current].bases]
            current = next((b for b in bases if b in self.symbols.classes), "")
        for cls in reversed(chain):  # a base class's fields first; an override keeps its place
            for stmt in self.symbols.classes[cls].body:
                if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                    fname = stmt.target.id
                    if fname.startswith("_") or last_name(stmt.annotation) == "ClassVar":
                        continue
                    fields[fname] = stmt
        properties, required = {}, []
        for fname, stmt in fields.items():
            prop, is_required = self.field(fname, stmt.annotation, stmt.value)
            properties[fname] = prop
            if is_required:
                required.append(fname)
        out: dict[str, Any] = {"properties": properties, "title": name, "type": "object"}
        if required:
            out["required"] = required
        doc = ast.get_docstring(self.symbols.classes[name])
        if doc:
            out["description"] = doc
        return out

    def field(
        self,
        name: str,
        annotation: ast.expr | None,
        value: ast.expr | None,
        description: str | None = None,
    ) -> tuple[dict[str, Any], bool]:
        """A field's (or a parameter's) schema and whether it is required.

        `value` is what follows `=` (a default or a `Field(...)` call); `description`, when given,
        is the docstring's and wins over the field's own.
        """
        required, has_default, default = True, False, None
        if isinstance(value, ast.Call) and last_name(value.func) == "Field":
            kwargs = _call_kwargs(value)
            given = value.args[0] if value.args else kwargs.get("default")
            if given is not None and not (isinstance(given, ast.Constant) and given.value is Ellipsis):
                required = False
                has_default, default = _literal(given)
            if "default_factory" in kwargs:
                required = False
            if description is None:
                description = _const_str(kwargs.get("description"))
        elif value is not None:
            required = False
            has_default, default = _literal(value)
        out = dict(self.schema(annotation))
        if description is not None:
            out["description"] = description
        if has_default:
            out["default"] = default
        if not self._is_model_ref(annotation):  # pydantic leaves a class's reference untitled
            out["title"] = name.title().replace("_", " ")
        return out, required

    def _is_model_ref(self, node: ast.expr | None) -> bool:
        for _ in range(20):
            if node is None:
                return False
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                node = ast.parse(node.value, mode="eval").body
                continue
            if isinstance(node, ast.Subscript) and last_name(node.value) in ("Annotated", "Optional"):
                node = node.slice.elts[0] if isinstance(node.slice, ast.Tuple) else node.slice
                continue
            members = _flatten_or(node)
            if len(members) > 1:
                rest = [m for m in members if not (isinstance(m, ast.Constant) and m.value is None)]
                if len(rest) != 1:
                    return False
                node = rest[0]
                continue
            name = last_name(node)
            if name is not None and self.symbols.is_model(name):
                return True
            if name is not None and name in self.symbols.aliases:
                node = self.symbols.aliases[name]
                continue
            return False
        return False


def _flatten_or(node: ast.expr) -> list[ast.expr]:
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _flatten_or(node.left) + _flatten_or(node.right)
    return [node]


def _flat_any(schemas: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for s in schemas:
        out.extend(s["anyOf"] if set(s) == {"anyOf"} else [s])
    return out


def _literal_schema(values: list[Any]) -> dict[str, Any]:
    types = {_LITERAL_TYPES.get(type(v)) for v in values}
    out: dict[str, Any] = {"const": values[0]} if len(values) == 1 else {"enum": values}
    if len(types) == 1 and None not in types:
        out["type"] = types.pop()
    return out


def _const_str(node: ast.expr | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _field_description(metadata: list[ast.expr]) -> str | None:
    for item in metadata:
        if isinstance(item, ast.Call) and last_name(item.func) == "Field":
            return _const_str(_call_kwargs(item).get("description"))
    return None


def pydantic_order(value: Any, parent: str | None = None) -> Any:
    """Keys sorted as pydantic sorts a JSON schema's (a `properties` object keeps field order)."""
    if isinstance(value, dict):
        keys = value if parent in ("properties", "default") else sorted(value)
        return {k: pydantic_order(value[k], k) for k in keys}
    if isinstance(value, list):
        return [pydantic_order(v, parent) for v in value]
    return value
