"""The HTTP chat model: any OpenAI-compatible `/v1/chat/completions` server (vLLM in production).

Native tools (`tools`, `tool_choice: auto`), `response_format` with a JSON schema, and vLLM's
`return_token_ids` (prompt and completion token ids) plus logprobs when the server returns them;
field-name variants are accepted leniently (`simulate.http_parse`). Failures are handled in layers: a per-request timeout;
retries (tenacity) with jittered exponential backoff on 429, 5xx, timeouts and connection errors
(honouring `Retry-After`); a circuit breaker that opens after N consecutive failed attempts and lets one trial
request through after a cool-down; other 4xx answers fail at once with the server's message. A
capacity limiter bounds the requests in flight.

Several base URLs (vLLM replicas) form a `simulate.replicas.ReplicaPool`: each attempt goes to the
least busy serving replica, a failing one is ejected and probed back, and a retry goes to another
replica at once; the backoff sleep is only for when every serving replica has failed this request.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import anyio
import httpx
import structlog
from tenacity import AsyncRetrying, RetryCallState, RetryError, retry_if_exception_type, stop_after_attempt

from arena.protocols import ModelError
from arena.types import Completion, Message, SamplingParams, ToolSpec
from simulate.breaker import CircuitBreaker
from simulate.calls import current_role, record_completion, record_failure
from simulate.chat_format import visible_text
from simulate.http_parse import parse_chat_response
from simulate.model_errors import ModelRequestError, ModelUnavailable
from simulate.replicas import Replica, ReplicaPool

log = structlog.get_logger(__name__)


def pinned_sampling(params: SamplingParams) -> dict[str, Any]:
    """Every sampling field a vLLM server fills from the model's generation config when a request
    leaves it out (`simulate.generation_defaults`), set to what `params` says."""
    return {
        "max_tokens": params.max_tokens,
        "temperature": params.temperature,
        "top_p": params.top_p,
        "top_k": params.top_k,
        "min_p": params.min_p,
        "repetition_penalty": params.repetition_penalty,
    }


class _Retryable(Exception):
    def __init__(self, message: str, replica: Replica, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.replica = replica
        self.retry_after = retry_after


class HttpChatModel:
    """A `ChatModel` talking to an OpenAI-compatible server, or to several replicas of one.

    `base_url` is one base URL or a list (replicas); `pool` shares replica state with other clients
    of the same servers (`simulate.replicas.shared_pool`), else the client makes its own.
    `pin_sampling` sends every sampling field a vLLM server would otherwise take from the model's
    generation config (the policy's server: evaluation then samples as GRPO does); without it the
    truncation and penalty fields go only when set (OpenAI's API refuses them).
    `chat_template_kwargs` go with every request (vLLM renders the prompt with them, as the trainer
    renders the policy's: `simulate.chat_format`); with thinking on the reasoning is cut from the text.
    """

    backend = "http"
    endpoint = "/chat/completions"  # under each replica's /v1

    def __init__(
        self,
        base_url: str | Sequence[str],
        model: str,
        *,
        api_key: str | None = None,
        role: str = "policy",
        timeout_s: float = 120.0,
        connect_timeout_s: float = 10.0,
        retries: int = 4,
        backoff_s: float = 0.5,
        backoff_max_s: float = 20.0,
        breaker_threshold: int = 5,
        breaker_cooldown_s: float = 30.0,
        concurrency: int = 16,
        return_token_ids: bool = True,
        pin_sampling: bool = False,
        chat_template_kwargs: Mapping[str, Any] | None = None,
        extra_body: dict[str, Any] | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        clock: Callable[[], float] = time.monotonic,
        pool: ReplicaPool | None = None,
    ) -> None:
        self.name = model
        self.role = role
        urls = [base_url] if isinstance(base_url, str) else list(base_url)
        self.pool = pool or ReplicaPool(
            urls,
            role=role,
            threshold=breaker_threshold,
            cooldown_s=breaker_cooldown_s,
            probe_timeout_s=connect_timeout_s,
            api_key=api_key,
            transport=transport,
            clock=clock,
        )
        self.base_url = self.pool.replicas[0].api  # the first replica's (the only one's) /v1
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._timeout = httpx.Timeout(timeout_s, connect=connect_timeout_s)
        self.retries = max(0, retries)
        self.backoff_s = backoff_s
        self.backoff_max_s = backoff_max_s
        self._limiter = anyio.CapacityLimiter(max(1, concurrency))
        self.return_token_ids = return_token_ids
        self.pin_sampling = pin_sampling
        self.chat_template_kwargs = dict(chat_template_kwargs or {})
        self._extra_body = dict(extra_body or {})
        self._transport = transport
        self._client: httpx.AsyncClient | None = None

    @property
    def breaker(self) -> CircuitBreaker:
        """The first replica's circuit breaker (with one base URL: the server's)."""
        return self.pool.replicas[0].breaker

    async def __aenter__(self) -> HttpChatModel:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connection pool."""
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = httpx.AsyncClient(
                timeout=self._timeout, headers=self._headers, transport=self._transport
            )
        return self._client

    def request_body(
        self, messages: list[Message], tools: list[ToolSpec] | None, params: SamplingParams
    ) -> dict[str, Any]:
        """The JSON body sent for one chat call."""
        body: dict[str, Any] = {"model": self.name, "messages": [m.openai() for m in messages]}
        sampling = pinned_sampling(params)
        if not self.pin_sampling:
            # OpenAI's own API refuses vLLM's extra fields: send them only when they say something.
            neutral = {"top_k": 0, "min_p": 0.0, "repetition_penalty": 1.0}
            sampling = {k: v for k, v in sampling.items() if neutral.get(k, object()) != v}
        body.update(sampling)
        if params.stop:
            body["stop"] = params.stop
        if params.seed is not None:
            body["seed"] = params.seed
        if params.logprobs:
            body["logprobs"] = True
        if tools:
            body["tools"] = [t.openai() for t in tools]
            if params.constrain_tool_calls or params.require_tool_call:
                for entry in body["tools"]:
                    entry["function"]["strict"] = True
            body["tool_choice"] = "required" if params.require_tool_call else "auto"
        if params.json_schema is not None:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "output", "schema": params.json_schema, "strict": True},
            }
        if self.return_token_ids:
            body["return_token_ids"] = True
        if self.chat_template_kwargs:
            body["chat_template_kwargs"] = dict(self.chat_template_kwargs)
        body.update(self._extra_body)
        return body

    async def chat(
        self,
        messages: list[Message],
        *,
        tools: list[ToolSpec] | None = None,
        params: SamplingParams | None = None,
    ) -> Completion:
        """One completion, with retries and the circuit breaker."""
        params = params or SamplingParams()
        role = current_role(self.role)
        body = self.request_body(messages, tools, params)
        started = time.perf_counter()
        attempts = 0
        try:
            completion, attempts = await self._with_retries(body)
        except ModelError as exc:
            record_failure(role, self.backend, self.name, started, exc, attempts=max(1, attempts))
            raise
        completion.latency_s = time.perf_counter() - started
        record_completion(role, self.backend, self.name, completion, attempts=attempts)
        return completion

    async def _with_retries(self, body: dict[str, Any]) -> tuple[Completion, int]:
        """The completion and the attempts it took; `ModelUnavailable` once they are spent."""
        tried: list[Replica] = []  # replicas this request failed on since its last backoff sleep
        retrying = AsyncRetrying(
            stop=stop_after_attempt(self.retries + 1),
            retry=retry_if_exception_type(_Retryable),
            wait=lambda state: self._next_wait(state, tried),
            sleep=anyio.sleep,
        )
        try:
            async for attempt in retrying:
                with attempt:
                    return await self._attempt(body, tried), attempt.retry_state.attempt_number
        except RetryError as exc:
            last = exc.last_attempt.exception()
            assert isinstance(last, _Retryable)
            error = str(last) if len(self.pool.replicas) == 1 else f"{last.replica.api}: {last}"
            raise ModelUnavailable(
                f"{self._target()} failed after {self.retries + 1} attempts: {error}"
            ) from None
        raise AssertionError("unreachable: tenacity either returns an attempt's result or raises")

    def _next_wait(self, state: RetryCallState, tried: list[Replica]) -> float:
        """Seconds before the next attempt of a request whose last attempt failed retryably.

        No wait while another replica is serving (go there now: the failed one is not in the way)
        or while none is (the next choice fails at once or probes one that is due); otherwise the
        backoff, after which every replica may be tried again.
        """
        assert state.outcome is not None
        exc = state.outcome.exception()
        assert isinstance(exc, _Retryable)
        tried.append(exc.replica)
        if self.pool.has_untried(tried) or not self.pool.any_serving():
            log.info("model.failover", url=exc.replica.api, attempt=state.attempt_number, error=str(exc))
            return 0.0
        delay = self._backoff(state.attempt_number - 1, exc.retry_after)
        error = str(exc) if len(self.pool.replicas) == 1 else f"{exc.replica.api}: {exc}"
        log.info(
            "model.retry",
            url=exc.replica.api,
            attempt=state.attempt_number,
            error=error,
            delay_s=round(delay, 3),
        )
        tried.clear()
        return delay

    def _target(self) -> str:
        if len(self.pool.replicas) == 1:
            return self.pool.replicas[0].api + self.endpoint
        return f"every {self.role} replica ({', '.join(r.url for r in self.pool.replicas)})"

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        # "Equal jitter": half the exponential step fixed, half random, so clients spread out
        # but still back off.
        step = min(self.backoff_max_s, self.backoff_s * 2**attempt)
        delay = step / 2 + random.uniform(0, step / 2)
        if retry_after is not None:
            delay = max(delay, min(retry_after, self.backoff_max_s))
        return delay

    async def _attempt(self, body: dict[str, Any], tried: list[Replica]) -> Completion:
        async with self._limiter:
            # Chosen once the limiter lets the request go, so the in-flight counts are current.
            replica = await self.pool.acquire(exclude=tried)
            url = replica.api + self.endpoint
            try:
                response = await self._http().post(url, json=body)
            except httpx.TimeoutException as exc:
                self.pool.failure(replica, f"timed out ({type(exc).__name__})")
                raise _Retryable(f"timed out ({type(exc).__name__})", replica) from exc
            except httpx.TransportError as exc:
                error = f"connection failed: {exc or type(exc).__name__}"
                self.pool.failure(replica, error, lost=True)
                raise _Retryable(error, replica) from exc
            finally:
                self.pool.release(replica)
        status = response.status_code
        if status == 429:
            # The server is alive and pacing us: retry, but do not count it against the circuit.
            self.pool.neutral(replica)
            raise _Retryable(f"429 {_error_text(response)}", replica, _retry_after(response))
        if status >= 500:
            error = f"{status} {_error_text(response)}"
            self.pool.failure(replica, error)
            raise _Retryable(error, replica, _retry_after(response))
        self.pool.success(replica)
        if status >= 400:
            raise ModelRequestError(f"{url} refused the request: {status} {_error_text(response)}")
        try:
            data = response.json()
        except ValueError as exc:
            raise ModelError(f"{url} answered {status} with a body that is not JSON") from exc
        return self.parse_response(data)

    def parse_response(self, data: Any) -> Completion:
        """The `Completion` of one answer body (subclasses that speak another endpoint override it)."""
        completion = parse_chat_response(data, model=self.name)
        completion.text = visible_text(completion.text, self.chat_template_kwargs)
        return completion


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None


def _error_text(response: httpx.Response) -> str:
    try:
        data = response.json()
    except ValueError:
        return response.text[:300]
    if isinstance(data, dict):
        error = data.get("error", data)
        if isinstance(error, dict):
            return str(error.get("message") or error.get("detail") or error)[:300]
        return str(data.get("detail") or error)[:300]
    return str(data)[:300]
