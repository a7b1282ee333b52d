"""Dynamic batching of concurrent requests into one blocking batch call, without a background task.

Callers `await batcher.submit(request)`. Whoever finds the batcher idle becomes the *leader*: it
waits a few milliseconds for more requests to arrive, takes up to `max_batch` queued requests and
runs `run_batch(jobs)` in a worker thread (so the event loop stays free). Only one batch runs at a
time. The batch function delivers each result as soon as it is ready with `job.finish(result)`
(callable from the worker thread), so a short request does not wait for the longest one in its
batch. When a batch ends, the first still-queued caller is woken to lead the next one.

Because the leader is an ordinary caller, there is no service task to start or stop and the
batcher works in any event loop. The price: the leader itself returns only when its whole batch
is over (it has to await the worker thread), while every other caller returns as its row ends. Cancellation is cooperative: a caller that stops waiting marks
its job `cancelled`, and the batch function should drop such rows at its next step.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

import anyio
import anyio.from_thread
import anyio.to_thread
import structlog

log = structlog.get_logger(__name__)

Req = TypeVar("Req")
Res = TypeVar("Res")


class Job(Generic[Req, Res]):
    """One queued request and, eventually, its result or error."""

    def __init__(self, request: Req) -> None:
        self.request = request
        # Set by the caller's side when it stops waiting; the batch function may skip the row.
        self.cancelled = False
        self.done = False
        self._result: Res | None = None
        self._error: BaseException | None = None
        self._wake = anyio.Event()

    def finish(self, result: Res) -> None:
        """Deliver the result. Call it from the batch function's worker thread."""
        anyio.from_thread.run_sync(self._deliver, result, None)

    def fail(self, error: BaseException) -> None:
        """Deliver an error for this job only. Call it from the batch function's worker thread."""
        anyio.from_thread.run_sync(self._deliver, None, error)

    def _deliver(self, result: Res | None, error: BaseException | None) -> None:
        if self.done:
            return
        self._result, self._error, self.done = result, error, True
        self._wake.set()

    def _outcome(self) -> Res:
        if self._error is not None:
            raise self._error
        return self._result  # type: ignore[return-value]


class DynamicBatcher(Generic[Req, Res]):
    """Gathers concurrent `submit` calls into batches for a blocking `run_batch` function."""

    def __init__(
        self,
        run_batch: Callable[[Sequence[Job[Req, Res]]], None],
        *,
        max_batch: int = 32,
        collect_s: float = 0.005,
        name: str = "batcher",
    ) -> None:
        if max_batch < 1:
            raise ValueError(f"max_batch must be at least 1, got {max_batch}")
        self._run_batch = run_batch
        self.max_batch = max_batch
        self.collect_s = collect_s
        self.name = name
        self._queue: list[Job[Req, Res]] = []
        self._busy = False
        # Statistics for benchmarks and tests.
        self.batches_run = 0
        self.largest_batch = 0

    @property
    def queued(self) -> int:
        """Requests waiting for a batch."""
        return len(self._queue)

    async def submit(self, request: Req) -> Res:
        """Queue one request and wait for its result (raises what the batch function raised)."""
        job: Job[Req, Res] = Job(request)
        self._queue.append(job)
        try:
            while not job.done:
                if not self._busy:
                    await self._lead()
                else:
                    await job._wake.wait()
                    job._wake = anyio.Event()
            return job._outcome()
        finally:
            if not job.done:
                job.cancelled = True
                if job in self._queue:
                    self._queue.remove(job)
            self._wake_next()

    def _wake_next(self) -> None:
        if not self._busy and self._queue:
            self._queue[0]._wake.set()

    async def _lead(self) -> None:
        self._busy = True
        try:
            if len(self._queue) < self.max_batch and self.collect_s > 0:
                await anyio.sleep(self.collect_s)
            batch = self._queue[: self.max_batch]
            del self._queue[: self.max_batch]
            if not batch:
                return
            self.batches_run += 1
            self.largest_batch = max(self.largest_batch, len(batch))
            # Shielded: the rows of other callers are in this batch, so the leader's own
            # cancellation must not abandon them; it takes effect once the batch is over.
            with anyio.CancelScope(shield=True):
                error: BaseException | None = None
                try:
                    await anyio.to_thread.run_sync(self._run_batch, batch)
                except Exception as exc:
                    error = exc
                    log.warning("batch.failed", batcher=self.name, size=len(batch), error=str(exc))
                for job in batch:
                    if not job.done:
                        job._deliver(
                            None, error or RuntimeError(f"{self.name}: batch ended without a result")
                        )
        finally:
            self._busy = False
            self._wake_next()


def batch_count(total: int, max_batch: int) -> int:
    """How many batches `total` simultaneous requests need (for reports)."""
    return math.ceil(total / max_batch) if total else 0
