"""Job execution inside a sandbox worker: tool calls, python checks, programs, tool listings.

Each handler takes the job dict the parent sent and returns `(header, blobs)` for the reply. Faults
of the model-written code become error replies (`ok: false`); only `MemoryError` escapes, as the
memory violation it is. Values travel back as JSON text (`*_json` fields), never pickled.
"""

from __future__ import annotations

import contextlib
import io
import json
import linecache
import sqlite3
import sys
import traceback
import types
from collections.abc import Callable
from typing import Any

from arena.env import Db, ToolDef, ToolError

_MAX_STDOUT = 64 * 1024
_MAX_MODULES = 64
_SQLITE_ATTACH = 24  # authorizer action code
# Model-written code is compiled under these names, never a real path: the compiler and traceback
# code would otherwise open the file to quote a line, and the audit hook refuses that.
TOOLS_FILE = "tools.py"


def _deny_attach(action: int, *_: Any) -> int:
    # ATTACH opens a file without a Python audit event; the mount namespace is the real guard (no
    # host file exists there), this refusal is early.
    return sqlite3.SQLITE_DENY if action == _SQLITE_ATTACH else sqlite3.SQLITE_OK


def open_image(image: bytes, *, read_only: bool) -> sqlite3.Connection:
    """An in-memory database from a serialized image, configured like the runtime's states."""
    conn = sqlite3.connect(":memory:", isolation_level=None)
    conn.deserialize(image)
    conn.execute("PRAGMA foreign_keys = ON")
    conn.set_authorizer(_deny_attach)
    if read_only:
        conn.execute("PRAGMA query_only = ON")
    return conn


def describe_error(exc: BaseException, user_files: tuple[str, ...]) -> str:
    """`Type: message`, plus where in the model-written code it happened (no full traceback)."""
    where = [
        f"{frame.filename} line {frame.lineno}"
        for frame in traceback.extract_tb(exc.__traceback__)
        if frame.filename in user_files
    ]
    text = f"{type(exc).__name__}: {exc}".strip()
    if isinstance(exc, SyntaxError) and exc.filename in user_files:
        where.append(f"{exc.filename} line {exc.lineno}")
    if isinstance(exc, SystemExit):
        text = f"the code called sys.exit({exc.code!r})"
    return f"{text} (at {where[-1]})" if where else text


def _compile(source: str, filename: str) -> types.CodeType:
    # linecache gets the source so tracebacks never open the file (the hook would refuse it).
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    return compile(source, filename, "exec", dont_inherit=True)


class ToolModules:
    """Imported `tools.py` modules, keyed by (path, mtime_ns, size); a few dozen at most."""

    def __init__(self) -> None:
        self._modules: dict[tuple[str, int, int], dict[str, ToolDef] | str] = {}
        self._count = 0

    def get(self, key: tuple[str, int, int], source: str | None) -> dict[str, ToolDef] | str | None:
        """The tools of a module (or its load error); None when unknown and no source was sent."""
        if key in self._modules:
            return self._modules[key]
        if source is None:
            return None
        if len(self._modules) >= _MAX_MODULES:
            self._modules.pop(next(iter(self._modules)))
        self._modules[key] = loaded = self._load(key[0], source)
        return loaded

    def _load(self, path: str, source: str) -> dict[str, ToolDef] | str:
        self._count += 1
        module = types.ModuleType(f"arena_sandboxed_tools_{self._count}")
        module.__file__ = path
        # Registered so pydantic and typing can resolve the module's own names.
        sys.modules[module.__name__] = module
        try:
            exec(_compile(source, TOOLS_FILE), module.__dict__)
        except MemoryError:
            raise
        except BaseException as exc:
            return f"tools.py does not load: {describe_error(exc, (TOOLS_FILE,))}"
        tools: dict[str, ToolDef] = {}
        for value in vars(module).values():
            if isinstance(value, ToolDef):
                tools[value.name] = value
        return tools


def _run_one_tool(
    tools: dict[str, ToolDef], db: Db, name: str, arguments: dict[str, Any]
) -> tuple[bool, str | None, str | None, str | None]:
    """Run one tool in a savepoint. Returns (ok, result_json, error, error_kind)."""
    td = tools.get(name)
    if td is None:
        return False, None, f"unknown tool {name!r}; available: {', '.join(sorted(tools))}", "unknown_tool"
    try:
        kwargs = td.validate(arguments)
    except ToolError as exc:
        return False, None, str(exc), "invalid_arguments"
    conn = db.connection
    conn.execute("SAVEPOINT arena_tool")
    if not td.writes:
        conn.execute("PRAGMA query_only = ON")
    try:
        output = td(db, **kwargs)
        result_json = json.dumps(output, ensure_ascii=False)
    except MemoryError:
        conn.execute("ROLLBACK TO arena_tool")
        raise
    except ToolError as exc:
        conn.execute("ROLLBACK TO arena_tool")
        return False, None, str(exc), "tool_error"
    except (TypeError, ValueError) as exc:
        conn.execute("ROLLBACK TO arena_tool")
        return False, None, f"{name} failed: {describe_error(exc, (TOOLS_FILE,))}", "internal"
    except sqlite3.OperationalError as exc:
        conn.execute("ROLLBACK TO arena_tool")
        if "readonly" in str(exc) or "read-only" in str(exc):
            return False, None, f"{name} is a read tool but tried to write: {exc}", "read_only"
        return False, None, f"{name} failed: {describe_error(exc, (TOOLS_FILE,))}", "internal"
    except BaseException as exc:
        conn.execute("ROLLBACK TO arena_tool")
        return False, None, f"{name} failed: {describe_error(exc, (TOOLS_FILE,))}", "internal"
    finally:
        conn.execute("PRAGMA query_only = OFF")
        conn.execute("RELEASE arena_tool")
    return True, result_json, None, None


def _make_db(job: dict[str, Any], image: bytes) -> Db:
    db = Db(open_image(image, read_only=False), now=job["now"], user_id=job["user_id"])
    # Db has no public setter for its counters; the runtime moves them the same way.
    db._id_counters = {str(k): int(v) for k, v in job["counters"].items()}
    return db


def _need_module(job: dict[str, Any], modules: ToolModules) -> dict[str, ToolDef] | str | None:
    key = tuple(job["module"])
    return modules.get((str(key[0]), int(key[1]), int(key[2])), job.get("source"))


Reply = tuple[dict[str, Any], list[bytes]]


def run_tool(job: dict[str, Any], modules: ToolModules) -> Reply:
    """One tool call on a database image."""
    tools = _need_module(job, modules)
    if tools is None:
        return {"missing_module": True}, []
    if isinstance(tools, str):
        return {"ok": False, "error": tools, "error_kind": "internal", "counters": job["counters"]}, []
    db = _make_db(job, job["image"])
    before = db.connection.total_changes
    ok, result_json, error, kind = _run_one_tool(tools, db, job["tool"], job["arguments"])
    changed = ok and db.connection.total_changes != before
    header = {
        "ok": ok,
        "result_json": result_json,
        "error": error,
        "error_kind": kind,
        "counters": db._id_counters if ok else job["counters"],
        "changed": changed,
    }
    blobs = [db.connection.serialize()] if changed else []
    db.connection.close()
    return header, blobs


def describe_tools(job: dict[str, Any], modules: ToolModules) -> Reply:
    """The schema and write flag of every tool of a tools file."""
    tools = _need_module(job, modules)
    if tools is None:
        return {"missing_module": True}, []
    if isinstance(tools, str):
        return {"ok": False, "error": tools}, []
    listing = [{"spec": td.spec.model_dump(), "writes": td.writes} for td in tools.values()]
    return {"ok": True, "tools": listing}, []


def _entry(source: str, filename: str, entry: str) -> Callable[..., Any]:
    namespace: dict[str, Any] = {"__name__": f"__sandboxed_{entry}__", "__builtins__": __builtins__}
    exec(_compile(source, filename), namespace)
    fn = namespace.get(entry)
    if not callable(fn):
        raise NameError(f"the code defines no function named {entry!r}")
    return fn


def run_check(job: dict[str, Any]) -> Reply:
    """`check(initial, final, answer) -> bool` over two read-only database images."""
    initial = open_image(job["initial"], read_only=True)
    final = open_image(job["final"], read_only=True)
    try:
        value = _entry(job["source"], "<check>", "check")(initial, final, job["answer"])
    except MemoryError:
        raise
    except BaseException as exc:
        return {"ok": False, "error": f"the check raised {describe_error(exc, ('<check>',))}"}, []
    finally:
        initial.close()
        final.close()
    if type(value).__name__ in ("bool", "bool_"):  # numpy's bool too
        return {"ok": True, "value": bool(value)}, []
    return {"ok": False, "error": f"the check returned {type(value).__name__}, not bool"}, []


class Tools:
    """What a program sees as `tools`: `tools.call(name, args)` or `tools.<name>(**args)`.

    Every call is recorded; a failing call is rolled back and raises `ToolError` in the program.
    """

    def __init__(self, tools: dict[str, ToolDef], db: Db) -> None:
        self._tools = tools
        self._db = db
        self.calls: list[dict[str, Any]] = []
        self.names = sorted(tools)

    def call(self, name: str, arguments: dict[str, Any] | None = None, /, **kwargs: Any) -> Any:
        """Call a tool by name with a dict of arguments (or keyword arguments)."""
        args = {**(arguments or {}), **kwargs}
        ok, result_json, error, _kind = _run_one_tool(self._tools, self._db, name, args)
        result = json.loads(result_json) if result_json is not None else None
        self.calls.append({"tool": name, "arguments": args, "ok": ok, "result": result, "error": error})
        if not ok:
            raise ToolError(error or f"{name} failed")
        return result

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name.startswith("_") or name not in self._tools:
            raise AttributeError(f"no tool named {name!r}")
        return lambda **kwargs: self.call(name, kwargs)


def run_program(job: dict[str, Any], modules: ToolModules) -> Reply:
    """`entry(payload)` — or `entry(payload, tools)` against an environment — with JSON in and out."""
    env = job.get("env")
    tools_proxy: Tools | None = None
    db: Db | None = None
    if env is not None:
        tools = _need_module(env, modules)
        if tools is None:
            return {"missing_module": True}, []
        if isinstance(tools, str):
            return {"ok": False, "error": tools}, []
        db = _make_db(env, env["image"])
        tools_proxy = Tools(tools, db)
    out = io.StringIO()
    try:
        fn = _entry(job["source"], "<program>", job["entry"])
        payload = json.loads(job["payload_json"])
        with contextlib.redirect_stdout(out):
            value = fn(payload) if tools_proxy is None else fn(payload, tools_proxy)
        result_json = json.dumps(value, ensure_ascii=False)
    except MemoryError:
        raise
    except (TypeError, ValueError) as exc:
        if "JSON serializable" in str(exc):
            return {"ok": False, "error": f"the program returned a non-JSON value: {exc}"}, []
        return {"ok": False, "error": f"the program raised {describe_error(exc, ('<program>',))}"}, []
    except BaseException as exc:
        return {"ok": False, "error": f"the program raised {describe_error(exc, ('<program>',))}"}, []
    header: dict[str, Any] = {"ok": True, "result_json": result_json, "stdout": out.getvalue()[:_MAX_STDOUT]}
    blobs: list[bytes] = []
    if tools_proxy is not None and db is not None:
        header["calls"] = tools_proxy.calls
        header["counters"] = db._id_counters
        header["changed"] = db.connection.total_changes > 0
        if header["changed"]:
            blobs.append(db.connection.serialize())
        db.connection.close()
    return header, blobs
