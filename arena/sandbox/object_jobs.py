"""Python-object environment jobs inside a sandbox worker: play tracks of calls on fresh instances.

The job names a backend by its key and carries its sources (`arena.env.objects.BackendSource` as
JSON) the first time a worker sees it; the worker loads it once and keeps it, as it keeps a tools
module. The request (`TracksRequest`) and the reply (`TracksReply`) travel as JSON text. Nothing
but `MemoryError` escapes: a backend that does not load, or a request it cannot build instances
for, is an error reply.
"""

from __future__ import annotations

from typing import Any

from arena.env.objects import Backend, BackendSource, TracksRequest, run_tracks
from arena.sandbox.jobs import Reply

_MAX_BACKENDS = 8


class Backends:
    """Loaded backends by key (a few at most: a worker serves one environment)."""

    def __init__(self) -> None:
        self._loaded: dict[tuple[str, int, int], Backend | str] = {}

    def get(self, key: tuple[str, int, int], source: str | None) -> Backend | str | None:
        """The backend (or why it does not load); None when unknown and no source was sent."""
        if key in self._loaded:
            return self._loaded[key]
        if source is None:
            return None
        if len(self._loaded) >= _MAX_BACKENDS:
            self._loaded.pop(next(iter(self._loaded)))
        try:
            loaded: Backend | str = Backend(BackendSource.model_validate_json(source))
        except MemoryError:
            raise
        except BaseException as exc:
            loaded = f"the backend does not load: {type(exc).__name__}: {exc}"
        self._loaded[key] = loaded
        return loaded


def run_objects(job: dict[str, Any], backends: Backends) -> Reply:
    """Play a `TracksRequest` on the job's backend."""
    key = tuple(job["module"])
    backend = backends.get((str(key[0]), int(key[1]), int(key[2])), job.get("source"))
    if backend is None:
        return {"missing_module": True}, []
    if isinstance(backend, str):
        return {"ok": False, "error": backend}, []
    try:
        reply = run_tracks(backend, TracksRequest.model_validate_json(job["request_json"]))
    except MemoryError:
        raise
    except BaseException as exc:  # a class name the backend lacks, a setup that raised
        return {"ok": False, "error": f"{type(exc).__name__}: {exc}"}, []
    return {"ok": True, "reply_json": reply.model_dump_json()}, []
