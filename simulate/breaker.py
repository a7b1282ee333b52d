"""A circuit breaker for a remote model server.

Closed while the server answers; open after `threshold` consecutive failed attempts (callers then
fail fast instead of piling onto a dead server); half-open after `cooldown_s`, when one trial
request may go out: its success closes the circuit, its failure opens it for another cool-down.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Literal

import structlog

from simulate.model_errors import ModelUnavailable

log = structlog.get_logger(__name__)


class CircuitBreaker:
    """Closed → open after `threshold` consecutive failures → half-open after `cooldown_s`.

    Half-open lets one trial request through; its success closes the circuit, its failure opens
    it again for another cool-down. While open, callers fail fast with `ModelUnavailable`.
    """

    def __init__(
        self, threshold: int, cooldown_s: float, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.threshold = max(1, threshold)
        self.cooldown_s = cooldown_s
        self._clock = clock
        self.failures = 0
        self._opened_at: float | None = None
        # When the half-open trial went out; a trial older than a cool-down (its caller was
        # cancelled, say) no longer blocks the next one.
        self._trial_started: float | None = None

    @property
    def state(self) -> Literal["closed", "open", "half_open"]:
        """The current state."""
        if self._opened_at is None:
            return "closed"
        if self._clock() - self._opened_at >= self.cooldown_s:
            return "half_open"
        return "open"

    def before_attempt(self, target: str) -> None:
        """Raise `ModelUnavailable` unless a request may go out now."""
        state = self.state
        trial_busy = self._trial_started is not None and self._clock() - self._trial_started < self.cooldown_s
        if state == "open" or (state == "half_open" and trial_busy):
            assert self._opened_at is not None
            wait = max(0.0, self.cooldown_s - (self._clock() - self._opened_at))
            raise ModelUnavailable(
                f"circuit open for {target} after {self.failures} consecutive failures; "
                f"next trial in {wait:.1f}s"
            )
        if state == "half_open":
            self._trial_started = self._clock()

    def success(self) -> None:
        """The server answered: close the circuit."""
        if self._opened_at is not None:
            log.info("circuit.closed", after_failures=self.failures)
        self.failures, self._opened_at, self._trial_started = 0, None, None

    def neutral(self) -> None:
        """An attempt that says nothing about health (429): just end a half-open trial."""
        self._trial_started = None

    def failure(self) -> None:
        """A failed attempt (5xx, timeout, connection error)."""
        self.failures += 1
        self._trial_started = None
        if self._opened_at is not None or self.failures >= self.threshold:
            if self._opened_at is None:
                log.warning("circuit.opened", failures=self.failures, cooldown_s=self.cooldown_s)
            self._opened_at = self._clock()
