"""What the admin API and /status use of the daemon, as protocols (`ops.daemon.Daemon` is the one
implementation).

The daemon builds its admin server (`ops.admin_server`, `ops.admin`) and its /status snapshot
(`ops.status`), so those modules must not import `ops.daemon` back: they name these protocols
instead. The module imports nothing at runtime but `typing`, so a CLI command that only wants
`ops.admin.check_exposure` pays for no more than it did.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from arena.store import Store
    from ops.config import ArenaConfig
    from ops.metrics import Metrics


class RunState(Protocol):
    """The daemon's run state and the store it reads the rest of /status from.

    Only the daemon's loop assigns these, each as a whole value, so the admin thread may read
    them without a lock (`ops.status.live_fields`).
    """

    config: ArenaConfig
    store: Store
    cluster: Any  # `ops.cluster.pool.WorkerPool` in cluster mode, else None
    round: int | None
    phase: str | None
    paused: bool
    paused_since: str | None
    pause_reason: str
    stopping: bool
    ready: bool
    models_up: bool
    sandbox: dict[str, Any]
    progress_state: dict[str, Any]
    rounds_completed: int


class StatusDocument(Protocol):
    """The /status document as the admin thread serves it (`ops.status.StatusSnapshot`)."""

    def document(self, daemon: RunState) -> dict[str, Any]:
        """The document for `daemon`, built without reading the store."""
        ...


class Controlled(RunState, Protocol):
    """What the admin API uses: the run state, the metrics, the /status snapshot and the controls
    its POSTs run on the daemon's loop."""

    metrics: Metrics

    # Read-only: the daemon holds the concrete `StatusSnapshot`, which this protocol only serves from.
    @property
    def status_snapshot(self) -> StatusDocument: ...

    async def pause(self, actor: str, reason: str = "") -> bool:
        """Persist the pause flag; returns whether it changed."""
        ...

    async def resume(self, actor: str) -> bool:
        """Clear the pause flag; returns whether it changed."""
        ...

    async def stop(self, actor: str) -> None:
        """Drain: finish the current work item, then exit."""
        ...
