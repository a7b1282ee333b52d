"""The sandbox for model-written code: confined worker processes behind an async pool.

Tools of synthesized environments (and of every environment with `ARENA_SANDBOX=all`), `python`
checks of synthesized tasks, solution programs of programmatic tasks and the diagnosis agent's
Python tool run here, never in the daemon. Use `SandboxPool` (see `arena.sandbox.pool`).

Layers, and what each one guarantees on this machine (the pool logs which hold at start):

- Process boundary: a worker is a separate process; whatever it does, the daemon only reads
  length-prefixed JSON and raw database images from it (never pickle), with size caps.
- Hard wall-clock timeout (parent side): a job that overruns is SIGKILLed with every process of
  its uid. CPU: a per-job `ITIMER_PROF` plus a lifetime `RLIMIT_CPU`, both enforced by the kernel.
- `RLIMIT_AS` (memory), `RLIMIT_NPROC` (processes), `RLIMIT_FSIZE`, `RLIMIT_NOFILE`, no cores.
- As root (sessions, CI): a fresh private uid/gid per worker, so `RLIMIT_NPROC` binds (Linux
  ignores it for root) and the worker can signal or ptrace nothing else; a network namespace with
  no interface up; a mount namespace whose root is a size-capped tmpfs holding read-only binds of
  the Python installation, the `arena` package and system libraries, chrooted: no other file of
  the host exists for the worker.
- Everywhere: a seccomp filter (no exec, no sockets, no namespaces, no ptrace) with
  no-new-privileges, and a parent-death signal.
- Not root (e.g. a systemd service user): no private uid (RLIMIT_NPROC then counts the service
  user's processes: it is set to their current count plus `max_processes`) and no chroot (files
  readable by the service user are guarded only by the audit hook); a user namespace still gives
  the network namespace where the kernel allows it; seccomp and rlimits apply unchanged.
- Job isolation: checks and programs run in a child forked per job, so nothing they change in the
  interpreter outlives them (one model-written check cannot rig the next verification). Tool calls
  run in the warm worker for speed; a job never sees another's database (each gets its own image),
  but module-level code of one synthesized tools.py could tamper with later tool calls of the same
  worker: that residual risk is bounded to tool results and states of other synthesized
  environments, and a worker is replaced on any violation or leftover process.
- A Python audit hook (`arena.sandbox.guard`) on top: refuses file access outside the private
  directory and the Python installation, `os.system`/exec/`subprocess`, sockets, `ctypes`, and
  turns any attempt into a `forbidden` violation. It is a second layer: code in the same
  interpreter can defeat its bookkeeping, never the OS layers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from arena.sandbox.models import (
    ProgramEnv,
    SandboxCallRecord,
    SandboxLimits,
    SandboxProgramError,
    SandboxProgramOutcome,
    SandboxToolInfo,
    SandboxToolOutcome,
    SandboxViolation,
    ViolationKind,
)

if TYPE_CHECKING:
    from arena.sandbox.pool import SandboxPool
    from arena.sandbox.process import SandboxStartError

__all__ = [
    "ProgramEnv",
    "SandboxCallRecord",
    "SandboxLimits",
    "SandboxPool",
    "SandboxProgramError",
    "SandboxProgramOutcome",
    "SandboxStartError",
    "SandboxToolInfo",
    "SandboxToolOutcome",
    "SandboxViolation",
    "ViolationKind",
]


def __getattr__(name: str) -> Any:
    # The pool (anyio, structlog) loads lazily: the worker process imports this package and must
    # stay free of them.
    if name == "SandboxPool":
        from arena.sandbox.pool import SandboxPool

        return SandboxPool
    if name == "SandboxStartError":
        from arena.sandbox.process import SandboxStartError

        return SandboxStartError
    raise AttributeError(f"module 'arena.sandbox' has no attribute {name!r}")
