"""Where a Python-object environment's code runs: in this process, or in the sandbox.

The rule is the one for every environment (`arena.env.runtime`): code the user supplied runs
in-process, and `ARENA_SANDBOX=all` (or an explicit pool) puts it in a sandbox worker. Both paths
play the same `TracksRequest` with the same `arena.env.objects.run_tracks`, so a score is the
same wherever it was computed.

An episode talks to a `LiveSession`: in-process it keeps the instances and runs each step on
them; sandboxed it keeps the calls made so far and has a worker replay them on fresh instances
with the new step (the backends are deterministic: the same calls give the same states and
results), because a worker keeps no state between jobs.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from arena.env.objects import (
    Backend,
    BackendSource,
    Session,
    Track,
    TracksReply,
    TracksRequest,
    read_backend,
    run_tracks,
)


@functools.lru_cache(maxsize=4)
def _loaded(source_json: str) -> Backend:
    # One load per backend content for the life of the process: every load registers its modules
    # (and a long-context backend's data) for good, so a daemon must not load one per round.
    return Backend(BackendSource.model_validate_json(source_json))


class ObjectSandbox(Protocol):
    """The part of `arena.sandbox.SandboxPool` a Python-object environment needs."""

    async def run_objects(self, backend: str, source_json: str, request_json: str) -> str:
        """Play a `TracksRequest` (JSON) in a worker bound to `backend`; the `TracksReply` JSON."""
        ...


class ObjectRunner:
    """Plays requests of one backend in-process (`sandbox=None`) or in a sandbox pool."""

    def __init__(self, source: BackendSource, name: str, sandbox: ObjectSandbox | None = None) -> None:
        self.source = source
        self.name = name
        self.sandbox = sandbox
        self._backend: Backend | None = None
        self._source_json: str | None = None

    @classmethod
    def from_folder(cls, folder: Path, sandbox: ObjectSandbox | None = None) -> ObjectRunner:
        """A runner of the backend in `folder` (`backend.json`); `ValueError` when it is broken."""
        return cls(read_backend(folder), str(Path(folder).absolute()), sandbox)

    @property
    def sandboxed(self) -> bool:
        """Whether the backend's code runs in sandbox workers."""
        return self.sandbox is not None

    def _json(self) -> str:
        if self._source_json is None:
            self._source_json = self.source.model_dump_json()
        return self._source_json

    def backend(self) -> Backend:
        """The backend loaded in this process (once per content); only for the in-process path."""
        if self._backend is None:
            self._backend = _loaded(self._json())
        return self._backend

    async def run(self, request: TracksRequest) -> TracksReply:
        """Play `request` where this runner's code runs."""
        if self.sandbox is None:
            return run_tracks(self.backend(), request)
        reply = await self.sandbox.run_objects(self.name, self._json(), request.model_dump_json())
        return TracksReply.model_validate_json(reply)

    def session(
        self, classes: Sequence[str], config: Mapping[str, Any], options: Mapping[str, Any] | None = None
    ) -> LiveSession:
        """A reset environment for one episode."""
        track = Track(classes=list(classes), config=dict(config), options=dict(options or {}))
        return LiveSession(self, track)


class LiveSession:
    """One episode's instances; `step` runs the calls of one policy step, in order."""

    def __init__(self, runner: ObjectRunner, track: Track) -> None:
        self.runner = runner
        self.track = track
        self.history: list[str] = []
        self._session: Session | None = None
        if not runner.sandboxed:
            self._session = Session(runner.backend(), track.classes, track.config, track.options)

    async def step(self, calls: Sequence[str]) -> list[str]:
        """Run `calls`; their results as the agent sees them."""
        if self._session is not None:
            results = [self._session.call(text) for text in calls]
        else:
            track = self.track.model_copy(update={"turns": [list(self.history), list(calls)]})
            reply = await self.runner.run(TracksRequest(tracks={"episode": track}))
            results = reply.results["episode"][1]
        self.history.extend(calls)
        return results

    async def snapshot(self) -> dict[str, Any]:
        """Every instance's public attributes now (JSON data)."""
        if self._session is not None:
            return self._session.snapshot()
        track = self.track.model_copy(update={"turns": [list(self.history)]})
        reply = await self.runner.run(TracksRequest(tracks={"episode": track}, snapshot=True))
        return reply.snapshots["episode"]
