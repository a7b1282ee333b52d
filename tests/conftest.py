"""Shared fixtures: the embedded model folder, a throw-away PostgreSQL database, a reloadable fake,
a PhaseContext for running one phase directly.

Fixtures owned by one package live in that package's own `tests/<package>/conftest.py`.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

try:
    from hypothesis import settings as hypothesis_settings
except ImportError:  # the unprivileged sandbox run installs only what tests/arena/sandbox imports
    pass
else:
    # Property tests draw the same examples on every run. Some assert statistical properties (the
    # curriculum settling inside its band against noisy simulated learners) that a rare draw can
    # break; drawn afresh each run, such a test fails a landing at random (one did, for seed 3).
    hypothesis_settings.register_profile("arena", derandomize=True)
    hypothesis_settings.load_profile("arena")

REPO_ROOT = Path(__file__).resolve().parent.parent
# One model cache for the whole suite (and for `make run`): conversion from GGUF happens once.
MODEL_CACHE = Path(os.environ.get("ARENA_TEST_MODEL_CACHE", REPO_ROOT / "var" / "models"))
PG_ADMIN_URL = os.environ.get("ARENA_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")


def pytest_configure(config: pytest.Config) -> None:
    """One torch thread per pytest-xdist worker (`make test` runs two on CI's two cores).

    Torch starts a thread per core; two workers each running two threads on two cores spin against
    each other, and a model test slows several-fold. With one each, the workers share the cores.
    Set before any test module imports torch (it reads the variable once, at import).
    """
    if os.environ.get("PYTEST_XDIST_WORKER"):
        os.environ.setdefault("OMP_NUM_THREADS", "1")
    else:  # the controller: every process of the run inherits the mark (`tests/leftovers.py`)
        from tests import leftovers

        os.environ[leftovers.MARK] = uuid.uuid4().hex
        config.stash[_SINCE] = leftovers.boot_ticks_now()


_SINCE = pytest.StashKey[int]()
_FOUND = pytest.StashKey[tuple[dict[int, str], dict[int, str]]]()


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """No process the suite started may outlive it: wait for them a little, kill what is left.

    Runs in the controller after the xdist workers are gone; what it found is reported in the
    summary, and fails the run when `ARENA_TEST_LEFTOVERS=fail`.
    """
    if os.environ.get("PYTEST_XDIST_WORKER") or _SINCE not in session.config.stash:
        return
    from tests import leftovers

    found = leftovers.settle(os.environ[leftovers.MARK], session.config.stash[_SINCE])
    session.config.stash[_FOUND] = found
    if any(found) and os.environ.get("ARENA_TEST_LEFTOVERS") == "fail":
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    """Name the processes the suite left behind (see `pytest_sessionfinish`)."""
    marked, suspects = config.stash.get(_FOUND, ({}, {}))
    if marked:
        terminalreporter.write_line(
            f"processes started by the suite left running (killed): {marked}", red=True
        )
    if suspects:
        terminalreporter.write_line(
            f"orphaned bwrap processes started during the run: {suspects}", yellow=True
        )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Start the slow tests first (model ones first of all), each group in collection order.

    pytest-xdist hands tests out in collection order: a minutes-long test collected late runs
    alone at the end while the other worker has nothing left. Longest first keeps both busy.
    """
    items.sort(
        key=lambda item: (item.get_closest_marker("model") is None, item.get_closest_marker("slow") is None)
    )


@pytest.fixture(autouse=True)
def _structlog_as_it_was() -> Iterator[None]:
    """Give every test the logging configuration the one before it had, structlog's and stdlib's.

    CLI commands configure logging for their process (`quiet()` filters below warnings; `arena run`
    puts a handler on the root logger that writes to whatever `sys.stdout` is). In the test process
    that would outlive the test: later tests' `capture_logs` would see no info events at all, and
    a library's log line (asyncio's, transformers') would land in the next test's captured stdout,
    in the middle of a command's `--json` report.
    """
    import logging

    import structlog

    configured, saved = structlog.is_configured(), structlog.get_config()
    loggers = [logging.getLogger(), *logging.Logger.manager.loggerDict.values()]
    states = [
        (lg, list(lg.handlers), lg.level, lg.propagate) for lg in loggers if isinstance(lg, logging.Logger)
    ]
    yield
    if configured:
        structlog.configure(**saved)
    else:
        structlog.reset_defaults()
    for lg, handlers, level, propagate in states:
        lg.handlers[:] = handlers
        lg.setLevel(level)
        lg.propagate = propagate


@pytest.fixture(scope="session")
def embedded_model_path() -> Path:
    """A safetensors folder of the embedded SmolLM2-135M-Instruct (converted once, then cached)."""
    from simulate.embedded import ensure_embedded_model

    return ensure_embedded_model(MODEL_CACHE)


@contextmanager
def _new_pg_database() -> Iterator[str]:
    """Create a PostgreSQL database of its own; yield its async SQLAlchemy URL; drop it after."""
    import psycopg

    name = f"arena_test_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    base = PG_ADMIN_URL.rsplit("/", 1)[0]
    try:
        yield f"{base.replace('postgresql://', 'postgresql+asyncpg://', 1)}/{name}"
    finally:
        with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def pg_database() -> Iterator[str]:
    """A fresh PostgreSQL database for this test session (shared by its tests); its async URL.

    PostgreSQL is a real part of the production store path, so its absence fails the test
    rather than skipping it.
    """
    with _new_pg_database() as url:
        yield url


@pytest.fixture
def fresh_pg_database() -> Iterator[str]:
    """A PostgreSQL database for this test alone (a daemon's whole store: no other test's rounds)."""
    with _new_pg_database() as url:
        yield url


class ScriptedReloadableChatModel:
    """Scripted stand-in for a served policy with reloadable weights (no model): answers every chat
    with a fixed text and records the weight folders it loads and the cache resets it gets."""

    name = "scripted-reloadable"

    def __init__(self) -> None:
        self.loaded: list[Path] = []
        self.resets = 0

    async def chat(self, messages: object, **kwargs: object) -> object:
        from arena.types import Completion

        return Completion(text="hello", completion_token_ids=[1, 2], prompt_token_ids=[3])

    def load_weights(self, path: str | Path) -> None:
        from arena.protocols import ModelError

        if not (Path(path) / "model.safetensors").is_file():
            raise ModelError(f"no safetensors weights at {path}")
        self.loaded.append(Path(path))

    def weights_changed(self) -> None:
        self.resets += 1


@pytest.fixture(scope="session")
def bfcl_wheel() -> Path:
    """The pinned bfcl-eval wheel, fetched from PyPI once (`tests/bfcl_dist.py`)."""
    from tests.bfcl_dist import wheel

    return wheel()


@pytest.fixture(scope="session")
def bfcl_folder(bfcl_wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """BFCL multi-turn imported from that wheel, as `arena envs import-bfcl` does (read only)."""
    from arena.public.bfcl.importer import import_bfcl

    folder = tmp_path_factory.mktemp("bfcl-import") / "bfcl"
    import_bfcl(bfcl_wheel, folder)
    return folder


@pytest.fixture
def reloadable_model() -> ScriptedReloadableChatModel:
    """A scripted fake policy whose weights the serving app's reload endpoints can load."""
    return ScriptedReloadableChatModel()


class ModelsStub:
    """The phases' model registry holding fixed models (None where a test needs no such role)."""

    policy_weights = None

    def __init__(self, policy: Any = None, helper: Any = None) -> None:
        self._policy, self._helper = policy, helper

    async def policy(self) -> Any:
        return self._policy

    async def helper(self) -> Any:
        return self._helper


@pytest.fixture
def phase_context() -> Callable[..., Any]:
    """`phase_context(config, store=None, round_no=1, outputs=(), *, phase, policy, helper, metrics)`:
    a `PhaseContext` for running one phase directly (no daemon; safe points and progress do nothing),
    which sees `outputs` (`PhaseOutput` models) as the round's earlier phases' outputs."""
    from ops.metrics import Metrics
    from ops.phases.base import PhaseContext

    def make(
        config: Any,
        store: Any = None,
        round_no: int = 1,
        outputs: Iterable[Any] = (),
        *,
        phase: str = "plan",
        policy: Any = None,
        helper: Any = None,
        metrics: Any = None,
    ) -> PhaseContext:
        async def safe_point() -> None:
            return None

        return PhaseContext(
            round=round_no,
            phase=phase,
            config=config,
            store=store,
            metrics=metrics or Metrics(),
            models=ModelsStub(policy, helper),  # type: ignore[arg-type]
            _safe_point=safe_point,
            _progress=lambda done, total, note: None,
        ).with_outputs(*outputs)

    return make


@pytest.fixture
def recorded_rollouts(monkeypatch: pytest.MonkeyPatch) -> list[tuple[dict[str, list[Any]], Any]]:
    """Every batch GRPO hands to TRL: (the rollout dictionary, the `SampledBatch` it was built from)."""
    from trainer.rollout import RolloutBridge

    recorded: list[tuple[dict[str, list[Any]], Any]] = []
    build_output = RolloutBridge.build_output

    def recording(self: RolloutBridge, batch: Any, **kwargs: Any) -> dict[str, list[Any]]:
        out = build_output(self, batch, **kwargs)
        recorded.append((out, batch))
        return out

    monkeypatch.setattr(RolloutBridge, "build_output", recording)
    return recorded
