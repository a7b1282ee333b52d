"""One episode's view of an environment: tool results, the instance protocols, executable instances.

`ExecutableInstance` is a private copy of an executable environment's database plus its tools. Tools
run in-process (a write tool inside a transaction that a failure rolls back) or in a `ToolSandbox`
worker on the serialized state, whose new state the instance then adopts. An instance sees its
environment as an `InstanceSource` protocol: `arena.env.runtime`, which makes instances, imports this
module, never the other way round.
"""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

import anyio.lowlevel
import structlog
from pydantic import BaseModel

from arena.env.db import Db
from arena.env.state import (
    StateDiff,
    changed_tables,
    copy_state,
    diff_states,
    diff_tables,
    page_owners,
    schema_rows,
    to_image,
)
from arena.env.tool import ToolDef, ToolError
from arena.types import ToolSpec

if TYPE_CHECKING:
    from arena.sandbox.models import SandboxToolOutcome

log = structlog.get_logger(__name__)

ErrorKind = Literal["unknown_tool", "invalid_arguments", "tool_error", "read_only", "internal", "sandbox"]


class ToolResult(BaseModel):
    """The outcome of one tool call, as the episode runner records it.

    `ok=False` carries a clean, agent-facing `error` (never a traceback); `error_kind` says whose
    fault it was: the call (`unknown_tool`, `invalid_arguments`), the tool's own refusal
    (`tool_error`), or a defect (`read_only`, `internal`, `sandbox`).
    """

    tool: str
    ok: bool
    output: Any = None
    error: str | None = None
    writes: bool = False
    duration_us: float = 0.0
    error_kind: ErrorKind | None = None


class WriteRecord(BaseModel):
    """One successful call of a write tool, as the instance's write log keeps it (for action checks)."""

    tool: str
    arguments: dict[str, Any]
    output: Any = None


@runtime_checkable
class EnvInstance(Protocol):
    """What the episode runner talks to; simulated environments implement it too."""

    tool_specs: list[ToolSpec]

    async def call(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        """Run one tool call. Never raises for faults of the call or the tool."""
        ...

    async def aclose(self) -> None:
        """Release the instance."""
        ...


class ToolSandbox(Protocol):
    """The part of `arena.sandbox.SandboxPool` an instance needs (structural: no pool import)."""

    async def call_tool(
        self,
        env_dir: Path,
        db_image: bytes,
        *,
        now: str,
        user_id: int | str,
        id_counters: dict[str, int],
        tool: str,
        arguments: dict[str, Any],
    ) -> SandboxToolOutcome:
        """Run one tool in a worker on a copy of `db_image`; returns the outcome and the new image."""
        ...

    async def describe_tools(self, env_dir: Path) -> list[Any]:
        """`SandboxToolInfo`s (`.spec: ToolSpec`, `.writes: bool`) of `env_dir/tools.py`."""
        ...


class InstanceSource(Protocol):
    """The part of `arena.env.runtime.Environment` an instance reads (structural: no runtime import)."""

    path: Path
    tools: dict[str, ToolDef]
    tool_specs: list[ToolSpec]
    write_tools: list[str]
    template: sqlite3.Connection | None

    @property
    def name(self) -> str:
        """Identifier from env.toml."""
        ...

    @property
    def now(self) -> str:
        """The fixed current time of every episode."""
        ...

    def template_layout(self) -> tuple[bytes, list[Any], dict[int, str] | None]:
        """The template's image, schema rows and page owners."""
        ...


def _jsonable(value: Any) -> Any:
    """The tool's return value as plain JSON (what the agent will see); raises TypeError if it isn't."""
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    # A round trip normalises tuples to lists and keys to strings, exactly as the agent sees them.
    return json.loads(json.dumps(value, ensure_ascii=False, allow_nan=False))


class ExecutableInstance:
    """One episode's private database plus the environment's tools.

    `initial` is the state at reset (do not write it); `db` is the live state the tools change.
    """

    def __init__(
        self,
        env: InstanceSource,
        conn: sqlite3.Connection,
        initial: sqlite3.Connection,
        *,
        user_id: int | str,
        sandbox: ToolSandbox | None = None,
    ) -> None:
        self.env = env
        self.initial = initial
        self.db = Db(conn, now=env.now, user_id=user_id)
        self.tool_specs: list[ToolSpec] = env.tool_specs
        self._conn = conn
        self._sandbox = sandbox
        # Set when a committed call changed rows (total_changes alone also counts rolled-back ones).
        self._dirty = False
        # Every successful write call, in order: work whose effects cancel out leaves no other trace.
        self.write_log: list[WriteRecord] = []
        self._closed = False
        # Reads are the default: a read-only tool cannot write, the pragma lifts only for write tools.
        conn.execute("PRAGMA query_only = ON")

    @property
    def sandboxed(self) -> bool:
        """True when this instance's tools run in the sandbox."""
        return self._sandbox is not None

    @property
    def changed(self) -> bool:
        """Whether any write reached the live state since reset (cheap; no diff)."""
        return self._dirty

    async def call(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        """Run one tool call; faults of the call or the tool come back as `ok=False` results."""
        if self._sandbox is not None:
            return await self._call_sandboxed(name, arguments)
        # In-process tools are microseconds of SQLite work: run them on the loop, after a checkpoint
        # so that a cancelled episode stops between calls.
        await anyio.lowlevel.checkpoint()
        return self.call_sync(name, arguments)

    def call_sync(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        """`call` without the event loop, for in-process instances (tests, gate, benchmarks)."""
        if self._sandbox is not None:
            raise RuntimeError("a sandboxed instance can only be called with `await call(...)`")
        start = time.perf_counter_ns()
        td = self.env.tools.get(name)
        if td is None:
            return self._fail(name, start, "unknown_tool", self._unknown(name), writes=False)
        try:
            kwargs = td.validate(arguments)
        except ToolError as exc:
            return self._fail(name, start, "invalid_arguments", str(exc), writes=td.writes)
        conn = self._conn
        changes = conn.total_changes
        if td.writes:
            conn.execute("PRAGMA query_only = OFF")
            conn.execute("BEGIN")
        # A failed call leaves no trace, not even a consumed id.
        counters = dict(self.db._id_counters)
        try:
            output = _jsonable(td.fn(self.db, **kwargs))
        except ToolError as exc:
            self._end(td.writes, commit=False, counters=counters)
            return self._fail(name, start, "tool_error", str(exc) or f"{name} failed", writes=td.writes)
        except sqlite3.OperationalError as exc:
            self._end(td.writes, commit=False, counters=counters)
            if not td.writes and "readonly" in str(exc):
                log.warning("read_only_tool_wrote", env=self.env.name, tool=name)
                msg = f"internal error: {name} is a read-only tool but tried to change the database"
                return self._fail(name, start, "read_only", msg, writes=False)
            return self._crash(name, start, td.writes, exc)
        except Exception as exc:  # a defect (or a non-JSON result): logged, clean message for the agent
            self._end(td.writes, commit=False, counters=counters)
            return self._crash(name, start, td.writes, exc)
        self._end(td.writes, commit=True)
        if td.writes:
            self.write_log.append(WriteRecord(tool=name, arguments=dict(arguments), output=output))
            if conn.total_changes != changes:
                self._dirty = True
        return ToolResult(tool=name, ok=True, output=output, writes=td.writes, duration_us=_since_us(start))

    def _end(self, writes: bool, *, commit: bool, counters: dict[str, int] | None = None) -> None:
        if counters is not None:
            self.db._id_counters = counters
        if not writes:
            return
        conn = self._conn
        if conn.in_transaction:
            # A failed call leaves no half-done change behind.
            conn.execute("COMMIT" if commit else "ROLLBACK")
        conn.execute("PRAGMA query_only = ON")

    def _unknown(self, name: str) -> str:
        return f"unknown tool {name!r}; available tools: {', '.join(sorted(self.env.tools)) or '(none)'}"

    def _fail(self, name: str, start: int, kind: ErrorKind, message: str, *, writes: bool) -> ToolResult:
        return ToolResult(
            tool=name, ok=False, error=message, error_kind=kind, writes=writes, duration_us=_since_us(start)
        )

    def _crash(self, name: str, start: int, writes: bool, exc: BaseException) -> ToolResult:
        log.warning("tool_crashed", env=self.env.name, tool=name, error=repr(exc), exc_info=exc)
        detail = str(exc).splitlines()[0] if str(exc) else ""
        message = f"internal error in {name}: {type(exc).__name__}" + (f": {detail}" if detail else "")
        return self._fail(name, start, "internal", message, writes=writes)

    async def _call_sandboxed(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        """Run the call in a sandbox worker on the serialized state, then adopt the new state."""
        start = time.perf_counter_ns()
        spec = next((s for s in self.tool_specs if s.name == name), None)
        if spec is None:
            return self._fail(name, start, "unknown_tool", self._unknown(name), writes=False)
        writes = name in self.env.write_tools
        td = self.env.tools.get(name)
        if td is not None:
            # Validation is pure schema work; doing it here saves a worker round trip on bad calls.
            try:
                td.validate(arguments)
            except ToolError as exc:
                return self._fail(name, start, "invalid_arguments", str(exc), writes=writes)
        assert self._sandbox is not None
        sent = to_image(self._conn)
        try:
            outcome: SandboxToolOutcome = await self._sandbox.call_tool(
                self.env.path,
                sent,
                now=self.db.now(),
                user_id=self.db.user_id,
                id_counters=dict(self.db._id_counters),  # the handle's counters travel with the state
                tool=name,
                arguments=arguments,
            )
        except Exception as exc:  # SandboxViolation (timeout, memory, ...) or a tools.py that won't load
            log.warning("sandbox_call_failed", env=self.env.name, tool=name, error=repr(exc))
            kind = getattr(exc, "kind", type(exc).__name__)
            return self._fail(name, start, "sandbox", f"{name} failed in the sandbox ({kind})", writes=writes)
        return self._adopt(name, arguments, start, writes, sent, outcome)

    def _adopt(
        self,
        name: str,
        arguments: dict[str, Any],
        start: int,
        writes: bool,
        sent: bytes,
        outcome: SandboxToolOutcome,
    ) -> ToolResult:
        """Take a sandbox outcome: the result or error, and the state and counters after it."""
        if not outcome.ok:
            # The worker rolled the call back: the state and counters stay as they were.
            message = outcome.error or f"{name} failed"
            return self._fail(name, start, outcome.error_kind or "tool_error", message, writes=writes)
        # The worker hands back the very bytes it was sent when nothing changed: skip the reload.
        if outcome.db_image is not sent and outcome.db_image != sent:
            self._conn.deserialize(outcome.db_image)
            self._conn.execute("PRAGMA query_only = ON")
            self._dirty = True
        self.db._id_counters = dict(outcome.id_counters)
        if writes:
            self.write_log.append(WriteRecord(tool=name, arguments=dict(arguments), output=outcome.result))
        return ToolResult(
            tool=name, ok=True, output=outcome.result, writes=writes, duration_us=_since_us(start)
        )

    def snapshot(self) -> sqlite3.Connection:
        """An in-memory copy of the current state (independent of later calls)."""
        return copy_state(self._conn)

    def image(self) -> bytes:
        """The current state as serialized bytes."""
        return to_image(self._conn)

    def diff(self) -> StateDiff:
        """Rows added, removed and changed per table since reset."""
        if not self.changed:
            return StateDiff()
        # Compare only the tables whose pages changed; fall back to every table when the
        # schema or its layout moved, or SQLite cannot say which table owns which page.
        if self.initial is self.env.template:
            initial_image, initial_schema, owners = self.env.template_layout()
        else:
            initial_image, initial_schema, owners = (
                to_image(self.initial),
                schema_rows(self.initial),
                page_owners(self.initial),
            )
        if owners is None or schema_rows(self._conn) != initial_schema:
            return diff_states(self.initial, self._conn)
        tables = changed_tables(initial_image, to_image(self._conn), owners)
        return diff_tables(self.initial, self._conn, sorted(tables), before_image=initial_image)

    def close(self) -> None:
        """Release the private database (the shared template stays)."""
        if self._closed:
            return
        self._closed = True
        self._conn.close()
        if self.initial is not self.env.template:
            self.initial.close()

    async def aclose(self) -> None:
        """Release the instance."""
        self.close()

    def __enter__(self) -> ExecutableInstance:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _since_us(start_ns: int) -> float:
    return (time.perf_counter_ns() - start_ns) / 1000.0
