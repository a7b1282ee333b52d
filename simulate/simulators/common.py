"""The one helper every simulator uses: prompt → JSON → validate → bounded retries.

A simulator is a prompt, a pydantic output model and a JSON schema. `structured_call` sends the
prompt with `SamplingParams.json_schema` (the local backend constrains decoding to it; HTTP
backends pass it as `response_format`), then validates the answer anyway: the JSON must parse,
match the schema (jsonschema) and the pydantic model, and pass the simulator's own semantic check.
Truncated output (`finish_reason == "length"`), invalid JSON, a schema violation, a failed check
or a `ModelError` each cost one attempt; the first attempt uses the configured temperature and
later ones sample hotter with a different seed so a retry does not repeat the same bad answer.
When attempts run out, `SimulatorError` says which simulator failed and why (every attempt's
problem), which the episode records instead of an unhandled exception.

Every attempt is one structlog line (`simulator.call`) and is counted per (simulator, outcome);
`simulator_counts()` exposes the totals.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any, TypeVar

import structlog
from jsonschema import Draft202012Validator
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from arena.protocols import ChatModel, ModelError
from arena.types import Message, SamplingParams
from simulate.calls import model_role

log = structlog.get_logger(__name__)

T = TypeVar("T", bound=BaseModel)


class SimulatorError(RuntimeError):
    """A simulator gave no usable answer within its attempts. `problems` lists each attempt's fault."""

    def __init__(self, simulator: str, problems: list[str]) -> None:
        self.simulator = simulator
        self.problems = problems
        last = problems[-1] if problems else "no attempt made"
        super().__init__(f"{simulator} simulator gave no valid output after {len(problems)} attempts: {last}")


class SimulatorSettings(BaseModel):
    """How a simulator samples: stored with every episode that used it."""

    model_config = ConfigDict(frozen=True)

    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    retry_temperature: float = Field(default=0.7, ge=0.0, le=2.0)
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    max_tokens: int = Field(default=160, ge=8, le=4096)
    seed: int = 0
    attempts: int = Field(default=3, ge=1, le=10)

    def params(self, attempt: int, schema: dict[str, Any]) -> SamplingParams:
        """Sampling of attempt `attempt` (0-based): configured first, then hotter with a new seed."""
        return SamplingParams(
            temperature=self.temperature if attempt == 0 else max(self.temperature, self.retry_temperature),
            top_p=self.top_p,
            max_tokens=self.max_tokens,
            seed=self.seed + attempt,
            json_schema=schema,
        )


_counts: Counter[tuple[str, str]] = Counter()
_counts_lock = threading.Lock()


def _count(simulator: str, outcome: str) -> None:
    with _counts_lock:
        _counts[(simulator, outcome)] += 1


def simulator_counts() -> dict[tuple[str, str], int]:
    """Calls per (simulator, outcome) since start: outcome is `ok`, `retry` or `failed`."""
    with _counts_lock:
        return dict(_counts)


def reset_simulator_counts() -> None:
    """Forget the counts (tests and benchmarks)."""
    with _counts_lock:
        _counts.clear()


def extract_json(text: str) -> Any:
    """The JSON value in a model answer (a ```json fence or the outermost {...} is accepted)."""
    body = text.strip()
    fenced = re.search(r"```(?:json)?\s*(.*?)```", body, re.DOTALL)
    if fenced:
        body = fenced.group(1).strip()
    try:
        return json.loads(body)
    except json.JSONDecodeError:
        pass
    start, end = body.find("{"), body.rfind("}")
    if start < 0 or end <= start:
        raise ValueError("the answer holds no JSON object")
    try:
        return json.loads(body[start : end + 1])
    except json.JSONDecodeError as exc:
        raise ValueError(f"invalid JSON: {exc.msg} at character {exc.pos}") from None


def validate_answer(text: str, schema: dict[str, Any], output: type[T]) -> T:
    """Parse and check one answer against the JSON schema and the pydantic model; ValueError on fault."""
    data = extract_json(text)
    errors = sorted(Draft202012Validator(schema).iter_errors(data), key=lambda e: list(e.path))
    if errors:
        first = errors[0]
        where = "/".join(str(p) for p in first.path) or "(root)"
        raise ValueError(f"schema violation at {where}: {first.message[:200]}")
    try:
        return output.model_validate(data)
    except ValidationError as exc:
        first_err = exc.errors()[0]
        where = ".".join(str(x) for x in first_err["loc"]) or "(root)"
        raise ValueError(f"invalid answer at {where}: {first_err['msg']}") from None


class CallInfo(BaseModel):
    """What one successful structured call cost."""

    attempts: int
    latency_s: float
    prompt_tokens: int = 0
    completion_tokens: int = 0


async def structured_call(
    model: ChatModel,
    messages: list[Message],
    output: type[T],
    schema: dict[str, Any],
    *,
    simulator: str,
    settings: SimulatorSettings,
    check: Callable[[T], None] | None = None,
) -> tuple[T, CallInfo]:
    """Ask `model` for a JSON answer matching `schema`/`output`, retrying up to `settings.attempts`.

    `check(answer)` raises ValueError for answers that are well-formed but unusable (the
    simulator's own rules). Raises `SimulatorError` when no attempt gives a valid answer.
    """
    problems: list[str] = []
    started = time.perf_counter()
    prompt_tokens = completion_tokens = 0
    for attempt in range(settings.attempts):
        params = settings.params(attempt, schema)
        t0 = time.perf_counter()
        try:
            with model_role(simulator):
                completion = await model.chat(messages, params=params)
            prompt_tokens += completion.usage.prompt_tokens
            completion_tokens += completion.usage.completion_tokens
            if completion.finish_reason == "length":
                raise ValueError(f"truncated output (hit max_tokens={params.max_tokens})")
            answer = validate_answer(completion.text, schema, output)
            if check is not None:
                check(answer)
        except (ModelError, ValueError) as exc:
            problem = f"{type(exc).__name__}: {exc}" if isinstance(exc, ModelError) else str(exc)
            problems.append(problem)
            last = attempt + 1 == settings.attempts
            _count(simulator, "failed" if last else "retry")
            log.warning(
                "simulator.call",
                simulator=simulator,
                model=getattr(model, "name", ""),
                attempt=attempt + 1,
                ok=False,
                problem=problem[:300],
                seconds=round(time.perf_counter() - t0, 3),
            )
            continue
        _count(simulator, "ok")
        log.info(
            "simulator.call",
            simulator=simulator,
            model=getattr(model, "name", ""),
            attempt=attempt + 1,
            ok=True,
            seconds=round(time.perf_counter() - t0, 3),
        )
        info = CallInfo(
            attempts=attempt + 1,
            latency_s=time.perf_counter() - started,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
        )
        return answer, info
    raise SimulatorError(simulator, problems)


def compact(value: Any, limit: int = 400) -> str:
    """Short one-line JSON for prompts (cut with a marker when longer than `limit`)."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    return text if len(text) <= limit else text[: limit - 3] + "..."
