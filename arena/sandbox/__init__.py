"""The sandbox for model-written code: confined worker processes behind an async pool.

Tools of synthesized environments (and of every environment with `ARENA_SANDBOX=all`), `python`
checks of synthesized tasks, solution programs of programmatic tasks and the diagnosis agent's
Python tool run here, never in the daemon. Use `SandboxPool` (see `arena.sandbox.pool`).

Layers, and what each one guarantees, as root and as an unprivileged service user alike (the
pool logs them at start; there is no weaker mode: where a layer cannot be had, no worker starts):

- Process boundary: a worker is a separate process; whatever it does, the daemon only reads
  length-prefixed JSON and raw database images from it (never pickle), with size caps.
- A bubblewrap boundary per worker (`arena.sandbox.boundary`): its own user namespace (as root: a
  private uid instead), mount namespace with a read-only root holding only the Python
  installation, the `arena` package and system libraries plus a size-capped writable tmpfs (no
  store, no home, no /tmp, no /proc, no host socket), PID namespace (it can name and signal no
  process outside; everything it started dies with it) and network namespace.
- Hard wall-clock timeout (parent side): a job that overruns is SIGKILLed with its whole sandbox.
  CPU: a per-job `ITIMER_PROF` plus a lifetime `RLIMIT_CPU`, both enforced by the kernel.
- `RLIMIT_AS` (memory), `RLIMIT_NPROC` (processes, counted per user namespace and uid, so only
  the worker's own), `RLIMIT_FSIZE`, `RLIMIT_NOFILE`, no cores.
- A seccomp filter (no exec, no sockets, no namespaces, no ptrace) with no-new-privileges, and a
  parent-death signal.
- Environment isolation (`arena.sandbox.workers`): a worker serves one environment for its life,
  so module-level code of one synthesized tools.py cannot change another environment's tool
  results, images or checks. Checks and programs run in a child forked per job on workers that
  ran no environment's tools, so nothing they change outlives them.
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
