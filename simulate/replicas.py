"""Several replicas of one model server (vLLM) behind one client: load spreading, ejection, return.

A `ReplicaPool` holds the base URLs of one role's servers. Each request goes to the serving
replica with the fewest requests in flight (ties in turn). Failed attempts (connection error,
timeout, 5xx) are counted per replica by its `CircuitBreaker`; at the breaker's threshold the
replica is ejected, and a replica whose connection broke is ejected at once once weights have been
published to the pool, since a process that died or restarted serves its starting weights, not the
published ones. An ejected replica is probed (`GET /v1/models`) after the cool-down; when it
answers 200 it first gets the live weights (the `restore` hook the weight publisher installs) and
only then takes requests again, so no rollout samples stale weights after a return.

A pool of one URL to which nothing was published keeps the old single-server behaviour: the
breaker's half-open trial request is the probe.

Clients of the same servers in one process share one pool (`shared_pool`): the evaluation client,
the trainer's rollout client and the publisher then see the same ejections, the same loads and the
same restore hook.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import anyio
import httpx
import structlog

from simulate.breaker import CircuitBreaker
from simulate.model_errors import ModelUnavailable

log = structlog.get_logger(__name__)

Restore = Callable[[str], Awaitable[None]]  # loads the live weights into the replica at this root URL


def server_root(url: str) -> str:
    """A base URL without trailing slashes and `/v1`: the server's root (`http://vllm:8000`)."""
    return url.strip().rstrip("/").removesuffix("/v1").rstrip("/")


@dataclass(eq=False)
class Replica:
    """One server of a pool and what the pool knows about it."""

    url: str  # the server's root, without /v1
    breaker: CircuitBreaker
    in_flight: int = 0
    answered: int = 0  # requests it answered (any HTTP answer but 5xx): proof it serves
    ejected_at: float | None = None  # when it was ejected (None: serving)
    reason: str = ""  # why it was ejected
    checking: anyio.Event | None = None  # set when the probe (and restore) under way ends

    @property
    def api(self) -> str:
        """The OpenAI API base (`…/v1`)."""
        return self.url + "/v1"

    @property
    def serving(self) -> bool:
        """Whether requests may go to it."""
        return self.ejected_at is None


@dataclass(eq=False)
class ReplicaPool:
    """The replicas of one model role; see the module docstring for the rules."""

    urls: Sequence[str]
    role: str = "policy"
    threshold: int = 5
    cooldown_s: float = 30.0
    probe_timeout_s: float = 10.0
    api_key: str | None = None
    transport: httpx.AsyncBaseTransport | None = None
    clock: Callable[[], float] = time.monotonic
    replicas: list[Replica] = field(init=False)
    restore: Restore | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        roots = [server_root(u) for u in self.urls]
        if not roots:
            raise ValueError("a replica pool needs at least one base URL")
        for url in roots:
            if not url.startswith(("http://", "https://")):
                raise ValueError(f"replica URL {url!r} must start with http:// or https://")
        if len(set(roots)) != len(roots):
            raise ValueError(f"a replica URL is listed twice: {roots}")
        self.replicas = [
            Replica(u, CircuitBreaker(self.threshold, self.cooldown_s, clock=self.clock)) for u in roots
        ]
        self._next = 0  # round-robin position among equally loaded replicas
        # Held while weights are published, and while a returning replica is restored: a replica
        # never returns with the weights a publish in progress is replacing.
        self.weights_lock = anyio.Lock()

    # --- choosing ------------------------------------------------------------------------------

    def _single(self) -> bool:
        return len(self.replicas) == 1 and self.restore is None

    async def acquire(self, exclude: Sequence[Replica] = ()) -> Replica:
        """The replica for the next attempt (its in-flight count raised); `release` it after.

        Prefers serving replicas not in `exclude` (those this request already failed on). Raises
        `ModelUnavailable` naming every replica when none is serving and no probe is under way.
        """
        if self._single():
            replica = self.replicas[0]
            replica.breaker.before_attempt(replica.url)  # open circuit: ModelUnavailable at once
        else:
            await self.check_due()
            while not any(r.serving for r in self.replicas):
                pending = [r.checking for r in self.replicas if r.checking is not None]
                if not pending:
                    raise ModelUnavailable(f"no {self.role} replica is serving: {self.describe()}")
                await pending[0].wait()  # another request is probing one: its answer decides
            serving = [r for r in self.replicas if r.serving]
            fresh = [r for r in serving if r not in exclude] or serving
            replica = self._least_busy(fresh)
        replica.in_flight += 1
        return replica

    def _least_busy(self, candidates: list[Replica]) -> Replica:
        low = min(r.in_flight for r in candidates)
        n = len(self.replicas)
        for offset in range(n):
            index = (self._next + offset) % n
            replica = self.replicas[index]
            if replica in candidates and replica.in_flight == low:
                self._next = index + 1
                return replica
        raise AssertionError("unreachable: a candidate has the lowest load")

    def release(self, replica: Replica) -> None:
        """The attempt on `replica` is over."""
        replica.in_flight = max(0, replica.in_flight - 1)

    def any_serving(self) -> bool:
        """Whether a request may go anywhere now (with one URL and nothing published: always)."""
        return any(r.serving for r in self.replicas)

    def has_untried(self, tried: Sequence[Replica]) -> bool:
        """Whether a serving replica exists that is not in `tried` (a retry may go there at once)."""
        return any(r.serving and r not in tried for r in self.replicas)

    # --- outcomes ------------------------------------------------------------------------------

    def success(self, replica: Replica) -> None:
        """It answered (2xx or 4xx)."""
        replica.answered += 1
        replica.breaker.success()

    def neutral(self, replica: Replica) -> None:
        """It answered 429: alive and pacing us; says nothing about health."""
        replica.answered += 1
        replica.breaker.neutral()

    def failure(self, replica: Replica, error: str, *, lost: bool = False) -> None:
        """A failed attempt (5xx, timeout; `lost`: the connection could not be made or broke)."""
        replica.breaker.failure()
        if self._single() or not replica.serving:
            return
        if replica.breaker.failures >= self.threshold:
            self.eject(replica, f"{replica.breaker.failures} failed attempts, the last: {error}")
        elif lost and self.restore is not None:
            # Died or restarted: it would come back with its starting weights, not the published ones.
            self.eject(replica, f"connection lost ({error}); it must be given the live weights again")

    def eject(self, replica: Replica, reason: str) -> None:
        """Take `replica` out of the pool until a probe (and restore) brings it back."""
        first = replica.serving
        replica.ejected_at, replica.reason = self.clock(), reason
        if first:
            log.warning("model.replica_ejected", role=self.role, replica=replica.url, reason=reason[:300])

    def readmit(self, replica: Replica) -> None:
        """Put `replica` back (it answered its probe and holds the live weights)."""
        if not replica.serving:
            log.info(
                "model.replica_returned", role=self.role, replica=replica.url, after=replica.reason[:200]
            )
        replica.ejected_at, replica.reason = None, ""
        replica.breaker.success()

    # --- return --------------------------------------------------------------------------------

    def set_restore(self, restore: Restore) -> None:
        """What a returning replica must load first: the weights every serving replica has now."""
        self.restore = restore
        key = _key(self.urls)
        if _shared.get(key) is self:
            # What was published must outlive the clients of the moment (a rebuilt client joins it).
            _pinned[key] = self

    async def check_due(self) -> None:
        """Probe the ejected replicas whose cool-down is over (and restore those that answer)."""
        now = self.clock()
        for replica in self.replicas:
            due = replica.ejected_at is not None and now - replica.ejected_at >= self.cooldown_s
            if due and replica.checking is None:
                await self._check(replica)

    async def _check(self, replica: Replica) -> None:
        replica.checking = anyio.Event()
        try:
            error = await self.probe(replica)
            if error is not None:
                self.eject(replica, f"probe failed: {error}")  # restarts the cool-down
                return
            async with self.weights_lock:
                if replica.serving:  # a publish reached it meanwhile
                    return
                if self.restore is not None:
                    try:
                        await self.restore(replica.url)
                    except Exception as exc:  # any failure keeps stale weights out of rollouts
                        self.eject(replica, f"could not load the live weights: {exc}")
                        log.warning("model.replica_restore_failed", replica=replica.url, error=str(exc)[:300])
                        return
                self.readmit(replica)
        finally:
            replica.checking.set()
            replica.checking = None

    async def probe(self, replica: Replica) -> str | None:
        """`GET /v1/models` on `replica`: None when it answers 200, else what went wrong."""
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        try:
            async with httpx.AsyncClient(timeout=self.probe_timeout_s, transport=self.transport) as client:
                response = await client.get(replica.api + "/models", headers=headers)
        except httpx.HTTPError as exc:
            return f"{type(exc).__name__}: {exc}"
        return None if response.status_code == 200 else f"HTTP {response.status_code}"

    @asynccontextmanager
    async def publishing(self) -> AsyncIterator[None]:
        """Hold the weights while a publish replaces them (returns wait for it)."""
        async with self.weights_lock:
            yield

    # --- reporting -----------------------------------------------------------------------------

    def replica(self, url: str) -> Replica:
        """The replica at `url` (any spelling of its base URL)."""
        root = server_root(url)
        for replica in self.replicas:
            if replica.url == root:
                return replica
        raise KeyError(url)

    def describe(self) -> str:
        """Every replica's state, for error messages."""
        now = self.clock()
        parts = []
        for r in self.replicas:
            if r.serving:
                parts.append(f"{r.url} (serving)")
            else:
                assert r.ejected_at is not None
                wait = max(0.0, self.cooldown_s - (now - r.ejected_at))
                parts.append(f"{r.url} (ejected: {r.reason[:200]}; next probe in {wait:.1f}s)")
        return ", ".join(parts)


_shared: weakref.WeakValueDictionary[tuple[str, ...], ReplicaPool] = weakref.WeakValueDictionary()
_pinned: dict[tuple[str, ...], ReplicaPool] = {}  # shared pools with published weights: kept for good


def _key(urls: Sequence[str]) -> tuple[str, ...]:
    return tuple(sorted(server_root(u) for u in urls))


def shared_pool(urls: Sequence[str], **settings: object) -> ReplicaPool:
    """The process's pool for these servers, made with `settings` (`ReplicaPool`'s) if there is none.

    The first client to ask sets the pool's settings; later ones share its state. A pool lives as
    long as some client, publisher or caller holds it, or for good once weights were published to it.
    """
    key = _key(urls)
    pool = _shared.get(key)
    if pool is None:
        pool = ReplicaPool(list(urls), **settings)  # type: ignore[arg-type]
        _shared[key] = pool
    return pool


def find_shared_pool(urls: Sequence[str]) -> ReplicaPool | None:
    """The process's pool for these servers if a client made one (probes use it; they never make one)."""
    return _shared.get(_key(urls))


def serving_urls(urls: Sequence[str]) -> list[str] | None:
    """The replicas among `urls` that this process's pool lets serve (None: no client made a pool)."""
    pool = find_shared_pool(urls)
    return None if pool is None else [r.url for r in pool.replicas if r.serving]
