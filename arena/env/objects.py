"""Python-object environments: the state is Python objects and the tools are their public methods.

Some benchmarks ship their environments as classes (BFCL's file system, messaging, trading and
travel APIs; a later one may keep a pydantic database behind methods). Such an environment is a
*backend*: module sources, the classes defined in them, and how an instance is set up from an
initial configuration. This module is the kind itself, independent of any benchmark:

- `BackendSource` (`backend.json` beside the module files, `read_backend`) says which modules and
  classes there are; `load_backend` executes the modules in a private namespace. Their imports of
  each other resolve inside that namespace (so a benchmark's classes load without importing its
  package or its dependencies), the modules in `unavailable` are inert stand-ins, and everything
  else comes from the interpreter's own import system.
- `Session`: one scenario's instances, built by reset (`cls()`, then the setup method with a deep
  copy of the class's initial configuration). Its tools are the instances' public methods (on a
  name clash the class listed later wins); `call` runs one call expression
  (`arena.env.object_calls`); a snapshot is every instance's public attributes.
- `run_tracks`: fresh sessions played turn by turn, with state comparisons between them after given
  turns — what a benchmark's scorer needs (a policy's calls beside the reference's), in one job.

The code is third-party: it runs in the daemon for user-supplied backends and in a sandbox worker
with `ARENA_SANDBOX=all` (`arena.env.object_runtime` picks). Hence no anyio or structlog here.
"""

from __future__ import annotations

import builtins
import copy
import decimal
import inspect
import itertools
import json
import sys
import types
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from arena.env.object_calls import execute

MANIFEST = "backend.json"
_loads = itertools.count(1)


class BackendSource(BaseModel):
    """A backend: its modules' sources by import name, and the classes the environment offers."""

    model_config = ConfigDict(frozen=True)

    modules: dict[str, str] = Field(description="Import name -> module source text.")
    classes: dict[str, str] = Field(description="Class name -> the import name of its module.")
    setup: str | None = Field(None, description="Method called with the initial configuration at reset.")
    stateless: list[str] = Field(default_factory=list, description="Classes reset without configuration.")
    unavailable: list[str] = Field(
        default_factory=list, description="Modules the code gets as inert stand-ins (no process spawning)."
    )


class BackendManifest(BaseModel):
    """`backend.json`: `BackendSource` with file names (relative to the folder) instead of sources."""

    model_config = ConfigDict(extra="forbid")

    modules: dict[str, str]
    classes: dict[str, str]
    setup: str | None = None
    stateless: list[str] = Field(default_factory=list)
    unavailable: list[str] = Field(default_factory=list)


def read_backend(folder: Path) -> BackendSource:
    """The backend described by `folder/backend.json`; raises `ValueError` naming what is wrong."""
    try:
        manifest = BackendManifest.model_validate_json((folder / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ValueError(f"{folder / MANIFEST}: {exc}") from None
    sources: dict[str, str] = {}
    for name, file in manifest.modules.items():
        path = (folder / file).resolve()
        if folder.resolve() not in path.parents:
            raise ValueError(f"{folder / MANIFEST}: module {name} points outside the folder ({file})")
        try:
            sources[name] = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ValueError(f"{folder / MANIFEST}: module {name}: {exc}") from None
    missing = sorted(m for m in manifest.classes.values() if m not in sources)
    if missing:
        raise ValueError(f"{folder / MANIFEST}: classes name modules that are not listed: {missing}")
    return BackendSource(**{**manifest.model_dump(), "modules": sources})


class _Inert(types.ModuleType):
    """A module the backend may import but not use."""

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        raise ImportError(f"module {self.__name__!r} is not available to this environment's code")


class Backend:
    """The classes of a loaded `BackendSource`."""

    def __init__(self, source: BackendSource) -> None:
        self.source = source
        self._prefix = f"arena_objects_{next(_loads)}"
        self._modules: dict[str, types.ModuleType] = {}
        self._builtins = {**builtins.__dict__, "__import__": self._import}
        self.classes: dict[str, type] = {}
        self._methods: dict[type, list[str]] = {}
        for name, module in source.classes.items():
            cls = getattr(self._load(module), name, None)
            if not isinstance(cls, type):
                raise ValueError(f"module {module} defines no class {name}")
            self.classes[name] = cls

    def _load(self, name: str) -> types.ModuleType:
        if name in self._modules:
            return self._modules[name]
        # Registered under a private name: typing and pydantic resolve a class's names through it.
        module = types.ModuleType(f"{self._prefix}.{name}")
        module.__package__ = name.rpartition(".")[0]
        module.__file__ = f"<{name}>"
        module.__dict__["__builtins__"] = self._builtins
        self._modules[name] = module
        sys.modules[module.__name__] = module
        exec(compile(self.source.modules[name], f"<{name}>", "exec", dont_inherit=True), module.__dict__)
        return module

    def method_names(self, obj: Any) -> list[str]:
        """The public methods of an instance (looked up once per class: `inspect` is slow)."""
        cls = type(obj)
        if cls not in self._methods:
            members = inspect.getmembers(obj, predicate=inspect.ismethod)
            self._methods[cls] = [name for name, _ in members if not name.startswith("_")]
        return self._methods[cls]

    def _import(
        self,
        name: str,
        globals: Mapping[str, Any] | None = None,
        locals: Mapping[str, Any] | None = None,
        fromlist: Sequence[str] | None = (),
        level: int = 0,
    ) -> types.ModuleType:
        if level:
            package = (globals or {}).get("__package__") or ""
            base = package.rsplit(".", level - 1)[0] if level > 1 else package
            name = f"{base}.{name}" if name else base
        if name in self.source.modules:
            if not fromlist and "." in name:
                raise ImportError(f"write `from {name.rpartition('.')[0]} import ...` in backend modules")
            return self._load(name)
        if name.split(".")[0] in self.source.unavailable:
            return _Inert(name)
        return builtins.__import__(name, globals, locals, fromlist or (), 0)


def public_state(obj: Any) -> dict[str, Any]:
    """An instance's public attributes (what a snapshot holds and states are compared on)."""
    return {k: v for k, v in vars(obj).items() if not k.startswith("_")}


def _jsonable(value: Any, depth: int = 0) -> Any:
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if depth > 12:
        return repr(value)[:200]
    if isinstance(value, dict):
        return {str(k): _jsonable(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_jsonable(v, depth + 1) for v in value]
    return repr(value)


class Session:
    """The instances of one scenario, reset from its initial configuration."""

    def __init__(
        self,
        backend: Backend,
        classes: Sequence[str],
        config: Mapping[str, Any],
        options: Mapping[str, Any] | None = None,
    ) -> None:
        self.instances: dict[str, Any] = {}
        self.methods: dict[str, Callable[..., Any]] = {}
        setup = backend.source.setup
        for name in classes:
            if name not in backend.classes:
                raise KeyError(f"the backend has no class {name} (it has {', '.join(backend.classes)})")
            with decimal.localcontext():
                obj = backend.classes[name]()
                if setup and name not in backend.source.stateless:
                    getattr(obj, setup)(copy.deepcopy(config.get(name, {})), **(options or {}))
            self.instances[name] = obj
            for attr in backend.method_names(obj):
                self.methods[attr] = getattr(obj, attr)

    def call(self, text: str) -> str:
        """Run one call expression; its result as text (errors included, never raised)."""
        # A backend may set the thread's decimal precision (BFCL's square root does): keep that
        # inside the call, away from everything else this thread runs.
        with decimal.localcontext():
            return execute(text, self.methods)

    def snapshot(self) -> dict[str, dict[str, Any]]:
        """Every instance's public attributes as JSON data (other objects by their repr)."""
        return {name: _jsonable(public_state(obj)) for name, obj in self.instances.items()}


def differences(session: Session, reference: Session) -> list[str]:
    """`Class.attribute` of every public attribute of `reference` that `session` does not equal.

    Compared with the classes' own equality, where the objects live (no serialization between).
    """
    out: list[str] = []
    for name, ref in reference.instances.items():
        mine = session.instances.get(name)
        if mine is None or type(mine) is not type(ref):
            out.append(name)
            continue
        for attr, value in public_state(ref).items():
            try:
                # `!=` with the session's value first, as BFCL compares: the class's own inequality.
                differs = not hasattr(mine, attr) or bool(getattr(mine, attr) != value)
            except Exception:  # a comparison that raises is no equality
                differs = True
            if differs:
                out.append(f"{name}.{attr}")
    return out


class Track(BaseModel):
    """One sequence of calls on fresh instances, turn by turn."""

    classes: list[str]
    config: dict[str, Any] = Field(default_factory=dict)
    options: dict[str, Any] = Field(default_factory=dict)
    turns: list[list[str]] = Field(default_factory=list)


class Comparison(BaseModel):
    """Compare `track`'s state with `reference`'s after turn `turn` of both."""

    turn: int
    track: str
    reference: str


class TracksRequest(BaseModel):
    """Tracks to play and the comparisons to make between them."""

    tracks: dict[str, Track]
    compare: list[Comparison] = Field(default_factory=list)
    snapshot: bool = False


class TracksReply(BaseModel):
    """Each track's results (per turn, per call), each comparison's differing attributes, snapshots."""

    results: dict[str, list[list[str]]]
    differences: list[list[str]] = Field(default_factory=list)
    snapshots: dict[str, dict[str, Any]] = Field(default_factory=dict)


def run_tracks(backend: Backend, request: TracksRequest) -> TracksReply:
    """Play every track on fresh instances, all of them turn by turn, comparing as asked."""
    sessions = {name: Session(backend, t.classes, t.config, t.options) for name, t in request.tracks.items()}
    results: dict[str, list[list[str]]] = {name: [] for name in request.tracks}
    found: list[list[str] | None] = [None] * len(request.compare)
    turns = max((len(t.turns) for t in request.tracks.values()), default=0)
    for turn in range(turns):
        for name, track in request.tracks.items():
            if turn < len(track.turns):
                results[name].append([sessions[name].call(text) for text in track.turns[turn]])
        for i, c in enumerate(request.compare):
            if c.turn == turn:
                found[i] = differences(sessions[c.track], sessions[c.reference])
    snapshots = {name: s.snapshot() for name, s in sessions.items()} if request.snapshot else {}
    return TracksReply(
        results=results,
        differences=[d if d is not None else ["(turn not played)"] for d in found],
        snapshots=json.loads(json.dumps(snapshots, default=str)),
    )
