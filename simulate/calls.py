"""Logging and counting of every model call, with an observer registry for metrics.

Backends call `record_call` once per `chat` (success or failure). Each record becomes one structlog
line (`model.call`) and updates in-process totals; observers registered with `add_observer` get the
record too, which is how `ops` turns calls into Prometheus metrics without `simulate` importing
`ops`.

The *role* of a call (policy, helper, judge, user, ...) is the backend's configured role unless a
caller overrides it for a block of code with `model_role(...)` or wraps a model with `with_role`,
so one loaded model can serve several roles and still be counted per role.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import structlog
from pydantic import BaseModel

from arena.protocols import ChatModel
from arena.types import Completion, Message, SamplingParams, ToolSpec

log = structlog.get_logger(__name__)

_ROLE: contextvars.ContextVar[str | None] = contextvars.ContextVar("arena_model_role", default=None)


class CallRecord(BaseModel):
    """One finished model call."""

    role: str
    backend: str
    model: str
    ok: bool
    latency_s: float
    prompt_tokens: int = 0
    completion_tokens: int = 0
    finish_reason: str | None = None
    attempts: int = 1
    error: str | None = None


Observer = Callable[[CallRecord], None]


@dataclass
class CallTotals:
    """Running totals for one (role, backend) pair."""

    calls: int = 0
    errors: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0


_observers: list[Observer] = []
_totals: dict[tuple[str, str], CallTotals] = {}
# Records may come from worker threads (a trainer thread calling a backend); keep totals consistent.
_lock = threading.Lock()


def add_observer(observer: Observer) -> Callable[[], None]:
    """Call `observer(record)` after every model call; returns a function that removes it."""
    with _lock:
        _observers.append(observer)

    def remove() -> None:
        with _lock, contextlib.suppress(ValueError):
            _observers.remove(observer)

    return remove


def call_totals() -> dict[tuple[str, str], CallTotals]:
    """A snapshot of the totals per (role, backend) since the process started (or `reset_totals`)."""
    with _lock:
        return {key: CallTotals(**vars(value)) for key, value in _totals.items()}


def reset_totals() -> None:
    """Forget the totals (tests and benchmarks)."""
    with _lock:
        _totals.clear()


def current_role(default: str) -> str:
    """The role set by the innermost `model_role` block, else `default` (the backend's own role)."""
    return _ROLE.get() or default


@contextlib.contextmanager
def model_role(role: str) -> Iterator[None]:
    """Attribute every model call made inside this block (and tasks it starts) to `role`."""
    token = _ROLE.set(role)
    try:
        yield
    finally:
        _ROLE.reset(token)


def record_completion(
    role: str, backend: str, model: str, completion: Completion, *, attempts: int = 1
) -> None:
    """Record a successful call from its completion (latency, tokens, finish reason)."""
    usage = completion.usage
    who = {"role": role, "backend": backend, "model": model, "ok": True, "attempts": attempts}
    record_call(
        CallRecord(
            **who,
            latency_s=completion.latency_s,
            prompt_tokens=usage.prompt_tokens,
            completion_tokens=usage.completion_tokens,
            finish_reason=completion.finish_reason,
        )
    )


def record_failure(
    role: str,
    backend: str,
    model: str,
    started: float,
    error: Exception,
    *,
    prompt_tokens: int = 0,
    attempts: int = 1,
) -> None:
    """Record a failed call that began at `started` (a `time.perf_counter()` reading)."""
    latency = time.perf_counter() - started
    who = {"role": role, "backend": backend, "model": model, "ok": False, "attempts": attempts}
    record_call(CallRecord(**who, latency_s=latency, prompt_tokens=prompt_tokens, error=str(error)))


def record_call(record: CallRecord) -> None:
    """Log one call, add it to the totals and tell the observers. Never raises."""
    fields = record.model_dump(exclude_none=True)
    if record.ok:
        log.info("model.call", **fields)
    else:
        log.warning("model.call", **fields)
    with _lock:
        totals = _totals.setdefault((record.role, record.backend), CallTotals())
        totals.calls += 1
        totals.errors += 0 if record.ok else 1
        totals.prompt_tokens += record.prompt_tokens
        totals.completion_tokens += record.completion_tokens
        totals.latency_s += record.latency_s
        observers = list(_observers)
    for observer in observers:
        try:
            observer(record)
        except Exception as exc:  # a broken metrics hook must not break a model call
            log.warning("model.call.observer_failed", observer=repr(observer), error=str(exc))


class RoleTagged:
    """A view of a chat model whose calls are attributed to a fixed role."""

    def __init__(self, inner: ChatModel, role: str) -> None:
        self.inner = inner
        self.role = role
        self.name = inner.name

    async def chat(
        self,
        messages: list[Message],
        *,
        tools: list[ToolSpec] | None = None,
        params: SamplingParams | None = None,
    ) -> Completion:
        """Forward to the wrapped model with the role set."""
        with model_role(self.role):
            return await self.inner.chat(messages, tools=tools, params=params)


def with_role(model: ChatModel, role: str) -> RoleTagged:
    """Share one loaded model between roles while counting each role separately."""
    return RoleTagged(model, role)
