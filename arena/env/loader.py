"""Loading an environment folder: validate every file, build the template database, import tools.

`load_environment(path)` either returns an `Environment` or raises `EnvLoadError` listing every
problem found (missing files, bad TOML, SQL errors with the failing statement, broken tools,
test cases naming unknown tools, ...), each with its file and line or field.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import re
import sqlite3
import sys
import traceback
from pathlib import Path
from types import ModuleType

import structlog

from arena.env.errors import EnvLoadError, Problems
from arena.env.runtime import Environment
from arena.env.simulated_spec import load_simulated_tools
from arena.env.spec import TOOL_NAME_RE, EnvToml, Origin, TestCase, parse_env_toml, parse_tests_toml
from arena.env.state import connect_memory, copy_state
from arena.env.tool import ToolDef, collect_tools

log = structlog.get_logger(__name__)

BUNDLED_ROOT = Path(__file__).resolve().parent / "bundled"
EXECUTABLE_FILES = ("env.toml", "schema.sql", "seed.sql", "tools.py", "tests.toml")
SIMULATED_FILES = ("env.toml", "tools.json")

# One loaded Environment per (folder, content version): the template is built and tools.py is
# imported once per version, however many callers load it.
_CACHE: dict[tuple[str, str], Environment] = {}


def folder_version(path: Path) -> str:
    """A content hash of the folder's files (names and bytes), 12 hex digits."""
    h = hashlib.sha256()
    for f in sorted(p for p in path.rglob("*") if p.is_file()):
        rel = f.relative_to(path)
        if any(part.startswith(".") or part == "__pycache__" for part in rel.parts) or f.suffix == ".pyc":
            continue
        h.update(str(rel.as_posix()).encode())
        h.update(b"\0")
        h.update(f.read_bytes())
        h.update(b"\0")
    return h.hexdigest()[:12]


def is_env_dir(path: Path) -> bool:
    """Whether a folder is an environment (it has an env.toml)."""
    return (path / "env.toml").is_file()


def _in_bundled(path: Path) -> bool:
    try:
        path.resolve().relative_to(BUNDLED_ROOT)
    except ValueError:
        return False
    return True


def load_environment(path: Path, *, origin: Origin | None = None, cache: bool = True) -> Environment:
    """Load and validate one environment folder.

    `origin` defaults to `bundled` inside the package's bundled set and `user` elsewhere; an
    env.toml that says `origin = "synthesized"` always wins (its code then runs sandboxed).
    Raises `EnvLoadError` with every problem found.
    """
    path = Path(path)
    problems = Problems()
    if not path.is_dir():
        problems.add(path, "not a folder" if path.exists() else "no such folder")
        problems.raise_if_any()
    version = folder_version(path)
    key = (str(path.resolve()), version)
    if cache and key in _CACHE:
        return _CACHE[key]

    spec = parse_env_toml(path / "env.toml", problems)
    kind = (
        spec.kind
        if spec
        else (
            "simulated"
            if (path / "tools.json").is_file() and not (path / "tools.py").exists()
            else "executable"
        )
    )
    if spec is not None and spec.origin == "synthesized":
        resolved_origin: Origin = "synthesized"
    else:
        resolved_origin = origin or ("bundled" if _in_bundled(path) else "user")

    if kind == "simulated":
        sim = load_simulated_tools(path, problems)
        problems.raise_if_any()
        assert spec is not None and sim is not None
        env = Environment(
            spec=spec,
            path=path,
            origin=resolved_origin,
            version=version,
            tool_specs=sim[0],
            write_tools=sim[1],
        )
    else:
        env = _load_executable(path, spec, resolved_origin, version, problems)
    if cache:
        _CACHE[key] = env
    return env


def _load_executable(
    path: Path, spec: EnvToml | None, origin: Origin, version: str, problems: Problems
) -> Environment:
    for name in EXECUTABLE_FILES[1:]:
        if not (path / name).is_file():
            problems.add(path / name, "missing file")
    template = _build_template(path, problems)
    tools_file = path / "tools.py"
    declared: dict[str, bool] | None = None
    imported: tuple[dict[str, ToolDef], set[str]] | None = None
    if not tools_file.is_file():
        pass
    elif origin == "synthesized":
        # Model-written code never runs in this process, not even its import: read it statically
        # here, and let a sandbox worker build the schemas (`Environment.describe`).
        declared = scan_tools(tools_file, problems)
    else:
        module_name = f"_arena_env_{_safe(spec.name if spec else path.name)}_{version}"
        imported = _import_tools(tools_file, module_name, problems)
    tests = parse_tests_toml(path / "tests.toml", problems) if (path / "tests.toml").is_file() else None
    if tests is not None and imported is not None:
        _check_cases(path / "tests.toml", tests, set(imported[0]), imported[1], template, problems)
    if tests is not None and declared is not None:
        _check_cases(path / "tests.toml", tests, set(declared), set(), template, problems)
    problems.raise_if_any()
    assert spec is not None and template is not None and (imported is not None or declared is not None)
    template.execute("PRAGMA query_only = ON")  # shared by every instance: never written again
    if declared is not None:
        return Environment(
            spec=spec,
            path=path,
            origin=origin,
            version=version,
            tool_specs=[],
            write_tools=[n for n, w in declared.items() if w],
            declared_tools=list(declared),
            template=template,
            tests=tests,
        )
    assert imported is not None
    return Environment(
        spec=spec,
        path=path,
        origin=origin,
        version=version,
        tools=imported[0],
        template=template,
        tests=tests,
    )


def _is_tool_decorator(node: ast.expr) -> bool:
    target = node.func if isinstance(node, ast.Call) else node
    return (isinstance(target, ast.Name) and target.id == "tool") or (
        isinstance(target, ast.Attribute) and target.attr == "tool"
    )


def scan_tools(file: Path, problems: Problems) -> dict[str, bool] | None:
    """The `@tool` functions of a tools.py, read without running it: {name: writes}.

    Used for synthesized environments, whose code may only run in the sandbox. Syntax errors and
    duplicate names are found here; type-hint and docstring problems when the sandbox describes it.
    """
    try:
        text = file.read_text(encoding="utf-8")
        tree = ast.parse(text, filename=str(file))
    except SyntaxError as exc:
        problems.add(file, f"error while importing: SyntaxError: {exc.msg}", line=exc.lineno)
        return None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        problems.add(file, f"cannot read: {exc}")
        return None
    found: dict[str, bool] = {}
    lines: dict[str, int] = {}
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for dec in node.decorator_list:
            if not _is_tool_decorator(dec):
                continue
            name, writes = node.name, False
            for kw in dec.keywords if isinstance(dec, ast.Call) else []:
                if (
                    kw.arg == "name"
                    and isinstance(kw.value, ast.Constant)
                    and isinstance(kw.value.value, str)
                ):
                    name = kw.value.value
                elif kw.arg == "writes" and isinstance(kw.value, ast.Constant):
                    writes = bool(kw.value.value)
            line = node.decorator_list[0].lineno  # where the definition starts, as in the in-process path
            if name in found:
                problems.add(
                    file, f"duplicate tool name {name!r} (first defined on line {lines[name]})", line=line
                )
                continue
            found[name], lines[name] = writes, line
    if not found:
        problems.add(file, "defines no tools: decorate functions with @tool")
    return found


def _safe(name: str) -> str:
    return re.sub(r"\W", "_", name)


# ---------------------------------------------------------------------------------------- SQL


def split_sql(text: str) -> list[tuple[int, str]]:
    """Split a SQL script into (first line, statement) pairs, using SQLite's own completeness test."""
    out: list[tuple[int, str]] = []
    buf: list[str] = []
    start: int | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if start is None:
            if not stripped or stripped.startswith("--"):
                continue  # blank lines and comments between statements belong to none
            start = number
        buf.append(line)
        chunk = "\n".join(buf)
        if start is not None and sqlite3.complete_statement(chunk):
            out.append((start, chunk.strip()))
            buf, start = [], None
    if start is not None and "\n".join(buf).strip():
        out.append((start, "\n".join(buf).strip()))  # a last statement without its semicolon
    return out


def _shorten(sql: str, limit: int = 120) -> str:
    one_line = " ".join(sql.split())
    return one_line if len(one_line) <= limit else one_line[: limit - 3] + "..."


def _apply_sql(conn: sqlite3.Connection, path: Path, problems: Problems) -> None:
    """Run a SQL file; on failure, find and report every failing statement with its line."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        problems.add(path, f"cannot read: {exc}")
        return
    before = copy_state(conn)
    try:
        conn.executescript(text)  # the fast path: one call for the whole file
        return
    except sqlite3.Error:
        pass
    # Start again from the state before the file and run statement by statement, so that every
    # failing statement is named (not only the first).
    before.backup(conn)
    before.close()
    for line, stmt in split_sql(text):
        try:
            conn.executescript(stmt)
        except sqlite3.Error as exc:
            problems.add(path, f"SQL error: {exc} in statement: {_shorten(stmt)}", line=line)


def _build_template(path: Path, problems: Problems) -> sqlite3.Connection | None:
    """Schema then seed into a fresh in-memory database (None when a file is missing)."""
    schema, seed = path / "schema.sql", path / "seed.sql"
    if not schema.is_file():
        return None
    conn = connect_memory()
    count = len(problems.items)
    _apply_sql(conn, schema, problems)
    if len(problems.items) == count:
        tables = conn.execute("SELECT count(*) FROM sqlite_master WHERE type = 'table'").fetchone()[0]
        if tables == 0:
            problems.add(schema, "defines no tables")
    if seed.is_file():
        _apply_sql(conn, seed, problems)
    return conn


# -------------------------------------------------------------------------------------- tools


def _import_error_line(exc: BaseException, file: Path) -> int | None:
    if isinstance(exc, SyntaxError) and exc.lineno is not None:
        return exc.lineno
    target = str(file.resolve())
    line = None
    for frame in traceback.extract_tb(exc.__traceback__):
        if str(Path(frame.filename).resolve()) == target:
            line = frame.lineno  # the innermost frame in tools.py
    return line


def _import_tools(
    file: Path, module_name: str, problems: Problems
) -> tuple[dict[str, ToolDef], set[str]] | None:
    """Import tools.py under a unique module name and collect its `@tool` functions.

    Returns the valid tools by name and the names of functions whose tool definition failed
    (already reported), or None when the file cannot be imported at all.
    """
    spec = importlib.util.spec_from_file_location(module_name, file)
    if spec is None or spec.loader is None:  # pragma: no cover - only for non-.py paths
        problems.add(file, "cannot be imported")
        return None
    module: ModuleType = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # pydantic and typing resolve names through sys.modules
    with collect_tools() as collected:
        try:
            spec.loader.exec_module(module)
        except Exception as exc:  # any error while importing an author's file is a problem, not a crash
            sys.modules.pop(module_name, None)
            detail = exc.msg if isinstance(exc, SyntaxError) else str(exc)
            problems.add(
                file,
                f"error while importing: {type(exc).__name__}: {detail}",
                line=_import_error_line(exc, file),
            )
            return None
    broken = {getattr(fn, "__name__", "?") for _, fn in collected.errors}
    for err, fn in collected.errors:
        problems.add(file, str(err), line=getattr(getattr(fn, "__code__", None), "co_firstlineno", None))
    tools: dict[str, ToolDef] = {}
    for td in collected.tools:
        line = td.fn.__code__.co_firstlineno if hasattr(td.fn, "__code__") else None
        if not TOOL_NAME_RE.fullmatch(td.name):
            problems.add(file, f"tool name {td.name!r} must match {TOOL_NAME_RE.pattern}", line=line)
        elif td.name in tools:
            first = tools[td.name].fn.__code__.co_firstlineno
            problems.add(file, f"duplicate tool name {td.name!r} (first defined on line {first})", line=line)
        else:
            tools[td.name] = td
    if not collected.tools and not collected.errors:
        problems.add(file, "defines no tools: decorate functions with @tool")
    return tools, broken


def _check_cases(
    file: Path,
    cases: list[TestCase],
    tools: set[str],
    broken: set[str],
    template: sqlite3.Connection | None,
    problems: Problems,
) -> None:
    """Cases must name existing tools, and their `expect_sql` queries must compile."""
    for i, case in enumerate(cases):
        if case.tool not in tools and case.tool not in broken:
            known = ", ".join(sorted(tools)) or "(none)"
            problems.add(
                file, f"unknown tool {case.tool!r} (tools: {known})", line=case.line, field=f"case[{i}].tool"
            )
        if template is None:
            continue
        for check in case.sql_checks():
            try:
                template.execute(f"EXPLAIN {check.sql}")
            except sqlite3.Error as exc:
                problems.add(
                    file, f"SQL error in expect_sql: {exc}", line=case.line, field=f"case[{i}].expect_sql"
                )


def clear_cache() -> None:
    """Forget loaded environments (tests; a long-running process reloads changed folders by version)."""
    _CACHE.clear()


__all__ = ["BUNDLED_ROOT", "EnvLoadError", "clear_cache", "folder_version", "is_env_dir", "load_environment"]
