"""The sandbox's public value types: limits, violations and job outcomes.

Kept free of anyio and structlog so that the worker process can import it cheaply (the worker
must not load `subprocess` or `asyncio`, see `arena.sandbox.guard`).
"""

from __future__ import annotations

import signal
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from arena.types import ToolSpec

ViolationKind = Literal["timeout", "cpu", "memory", "processes", "forbidden", "crashed"]
ToolErrorKind = Literal["tool_error", "invalid_arguments", "unknown_tool", "read_only", "internal"]


class SandboxLimits(BaseModel):
    """What one sandboxed job may use.

    `memory_mb` is the address space a job may add on top of the worker's own baseline (the
    interpreter with Arena's modules imported, about 40 MB), so the figure means the same on
    every machine. `max_processes` bounds the processes and threads of the worker's sandbox,
    the worker itself included. `disk_mb` sizes the private temporary directory.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    cpu_seconds: float = Field(default=5, gt=0, le=3600, description="CPU time per job.")
    memory_mb: int = Field(
        default=512, ge=16, le=1 << 20, description="Memory per job (MB, on top of the worker's ~40 MB)."
    )
    max_processes: int = Field(
        default=16,
        ge=1,
        le=4096,
        description="Processes and threads of a worker's sandbox (itself included).",
    )
    wall_timeout_s: float = Field(default=10, gt=0, le=86400, description="Wall-clock timeout per job.")
    disk_mb: int = Field(
        default=64, ge=1, le=1 << 20, description="Size of a job's private temporary directory."
    )

    def limits(self) -> SandboxLimits:
        """These limits alone (a section that extends them carries more than a worker needs)."""
        return SandboxLimits.model_validate(self.model_dump(include=set(SandboxLimits.model_fields)))


class SandboxViolation(Exception):
    """A job broke a limit or tried something forbidden; its worker was killed and replaced.

    `kind` is one of `timeout`, `cpu`, `memory`, `processes`, `forbidden`, `crashed`.
    """

    def __init__(self, kind: ViolationKind, message: str) -> None:
        super().__init__(message)
        self.kind: ViolationKind = kind
        self.message = message

    def __repr__(self) -> str:
        return f"SandboxViolation(kind={self.kind!r}, message={self.message!r})"


class SandboxProgramError(Exception):
    """Model-written code failed on its own terms: it raised, did not define the entry point,
    returned a value of the wrong type, or its tools file does not load. Not a violation: the
    worker is healthy and stays in the pool."""


class SandboxToolOutcome(BaseModel):
    """One sandboxed tool call: the result or a clean error, plus the state after it.

    A call that fails is rolled back, so `db_image` is then the image that was sent. `db_image` is
    also the sent image (the very same bytes object) when the tool changed nothing.
    """

    tool: str
    ok: bool
    result: Any = None
    error: str | None = None
    error_kind: ToolErrorKind | None = None
    writes: bool = False
    db_image: bytes
    id_counters: dict[str, int] = Field(default_factory=dict)
    duration_us: float = 0.0


class SandboxCallRecord(BaseModel):
    """One tool call a program made through its `tools` object."""

    tool: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    ok: bool
    result: Any = None
    error: str | None = None


class SandboxProgramOutcome(BaseModel):
    """Everything a program run produced.

    `calls`, `db_image` and `id_counters` are only meaningful when the program ran against an
    environment (`ProgramEnv`); `stdout` holds what it printed (truncated to 64 KiB).
    """

    result: Any = None
    stdout: str = ""
    calls: list[SandboxCallRecord] = Field(default_factory=list)
    db_image: bytes | None = None
    id_counters: dict[str, int] = Field(default_factory=dict)


class ProgramEnv(BaseModel):
    """The environment a program may call tools of: its folder and a database image to act on."""

    env_dir: str
    db_image: bytes
    now: str
    user_id: int | str = 1
    id_counters: dict[str, int] = Field(default_factory=dict)


class SandboxToolInfo(BaseModel):
    """A tool of a sandboxed tools file, as the sandbox saw it: schema and read/write flag."""

    spec: ToolSpec
    writes: bool


def violation_from_wire(kind: str, message: str) -> SandboxViolation:
    """A violation from a worker's report, with an unknown kind coerced to `crashed`."""
    known: tuple[str, ...] = ("timeout", "cpu", "memory", "processes", "forbidden", "crashed")
    if kind not in known:
        return SandboxViolation("crashed", f"worker reported an unknown violation {kind!r}: {message}")
    return SandboxViolation(kind, message)  # type: ignore[arg-type]


def classify_exit(returncode: int | None) -> tuple[ViolationKind, str]:
    """The violation a worker's exit status stands for."""
    if returncode is None:
        return "crashed", "stopped answering"
    if returncode < 0:
        sig = -returncode
        name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else f"signal {sig}"
        if sig in (signal.SIGPROF, signal.SIGXCPU):
            return "cpu", "used up its CPU time limit"
        if sig == signal.SIGSYS:
            return "forbidden", "made a system call the seccomp filter kills for"
        if sig == signal.SIGKILL:
            return "crashed", "was killed by SIGKILL (possibly the kernel's out-of-memory killer)"
        return "crashed", f"crashed with {name} (often memory exhaustion inside C code)"
    return "crashed", f"exited with status {returncode}"
