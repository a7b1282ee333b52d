"""Loaded environments: one folder's tools, rules and template database.

An `Environment` is one loaded folder. For an executable one it keeps a template database (schema
and seed applied once, in memory, read-only); `new_instance()` copies it with the SQLite backup API
into a private in-memory database (an `arena.env.instance.ExecutableInstance`), so a reset costs a
page copy and no process or file. Tools run in-process for reviewed environments, or through a
`ToolSandbox` (the `arena.sandbox` pool) for synthesized ones and whenever `ARENA_SANDBOX=all`.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import structlog

from arena.env.errors import EnvLoadError, Problem
from arena.env.instance import ExecutableInstance, ToolSandbox
from arena.env.spec import EnvToml, Kind, Origin, TestCase
from arena.env.state import copy_state, from_image, page_owners, schema_rows, to_image
from arena.env.tool import ToolDef
from arena.types import ToolSpec

log = structlog.get_logger(__name__)


class SandboxRequiredError(RuntimeError):
    """An environment that must run sandboxed was instantiated without a sandbox."""


def sandbox_all() -> bool:
    """True when `ARENA_SANDBOX=all` asks for every environment's tools to run in the sandbox."""
    return os.environ.get("ARENA_SANDBOX", "").strip().lower() == "all"


class Environment:
    """One loaded environment folder (executable or simulated). Build it with `load_environment`."""

    def __init__(
        self,
        *,
        spec: EnvToml,
        path: Path,
        origin: Origin,
        version: str,
        tools: dict[str, ToolDef] | None = None,
        tool_specs: list[ToolSpec] | None = None,
        write_tools: list[str] | None = None,
        template: sqlite3.Connection | None = None,
        tests: list[TestCase] | None = None,
        declared_tools: list[str] | None = None,
    ) -> None:
        self.spec = spec
        self.path = path
        self.origin: Origin = origin
        self.version = version
        self.tools: dict[str, ToolDef] = tools or {}
        self.tool_specs: list[ToolSpec] = (
            tool_specs if tool_specs is not None else [t.spec for t in self.tools.values()]
        )
        self.write_tools: list[str] = (
            write_tools if write_tools is not None else [n for n, t in self.tools.items() if t.writes]
        )
        self.template = template
        self.tests: list[TestCase] = tests or []
        self._template_layout: tuple[bytes, list[Any], dict[int, str] | None] | None = None
        # Synthesized environments: tool names read statically from tools.py; the schemas come
        # from a sandbox worker (`describe`), never from importing the file here.
        self.declared_tools = declared_tools
        self.described = declared_tools is None

    @property
    def tool_names(self) -> list[str]:
        """Every tool's name (known before `describe` for synthesized environments too)."""
        if not self.described and self.declared_tools is not None:
            return list(self.declared_tools)
        return [s.name for s in self.tool_specs]

    async def describe(self, sandbox: ToolSandbox) -> None:
        """Fill the tool schemas of a synthesized environment from a sandbox worker (idempotent).

        Raises `EnvLoadError` when its tools.py does not load or defines a broken tool.
        """
        if self.described:
            return
        try:
            infos = await sandbox.describe_tools(self.path)
        except Exception as exc:  # SandboxProgramError / SandboxViolation: the file is the problem
            raise EnvLoadError(
                [Problem(path=str(self.path / "tools.py"), message=f"in the sandbox: {exc}")]
            ) from None
        self.tool_specs = [info.spec for info in infos]
        self.write_tools = [info.spec.name for info in infos if info.writes]
        self.described = True

    def template_layout(self) -> tuple[bytes, list[Any], dict[int, str] | None]:
        """The template's image, schema rows and page owners, computed once (the template never changes)."""
        if self._template_layout is None:
            assert self.template is not None
            self._template_layout = (
                to_image(self.template),
                schema_rows(self.template),
                page_owners(self.template),
            )
        return self._template_layout

    # The fields of env.toml, as attributes (the contract's names).
    @property
    def name(self) -> str:
        """Identifier from env.toml."""
        return self.spec.name

    @property
    def title(self) -> str:
        """Human title."""
        return self.spec.title

    @property
    def category(self) -> list[str]:
        """Category path, top level first."""
        return self.spec.category

    @property
    def description(self) -> str:
        """What the environment is, shown to the agent."""
        return self.spec.description

    @property
    def rules(self) -> str:
        """Policy text shown to the agent."""
        return self.spec.rules

    @property
    def kind(self) -> Kind:
        """`executable` (SQLite + Python tools) or `simulated` (tools played by the helper LLM)."""
        return self.spec.kind

    @property
    def now(self) -> str:
        """The fixed current time of every episode."""
        return self.spec.now

    @property
    def user_id(self) -> int | str:
        """The logged-in user of every episode, unless an instance says otherwise."""
        return self.spec.user_id

    @property
    def tasks_path(self) -> Path | None:
        """The hand-written `tasks.toml`, if the folder has one (read by `arena.tasks`)."""
        p = self.path / "tasks.toml"
        return p if p.is_file() else None

    @property
    def sandboxed(self) -> bool:
        """Whether tools must run in the sandbox: model-written code, or `ARENA_SANDBOX=all`."""
        return self.kind == "executable" and (self.origin == "synthesized" or sandbox_all())

    def new_instance(
        self,
        *,
        user_id: int | str | None = None,
        image: bytes | None = None,
        sandbox: ToolSandbox | None = None,
    ) -> ExecutableInstance:
        """A private copy of the environment's state for one episode.

        `image` starts from another state (a serialized database, e.g. a complexified one) instead
        of the template. A sandboxed environment needs `sandbox`; passing one for an in-process
        environment runs its tools in the sandbox too.
        """
        if self.kind != "executable" or self.template is None:
            raise TypeError(
                f"environment {self.name!r} is {self.kind}: its instances come from the simulator"
            )
        if not self.described:
            raise SandboxRequiredError(
                f"environment {self.name!r} is synthesized: `await env.describe(pool)` before making instances"
            )
        if self.sandboxed and sandbox is None:
            raise SandboxRequiredError(
                f"environment {self.name!r} ({self.origin}) must run in the sandbox: pass sandbox=SandboxPool"
            )
        if image is None:
            conn = copy_state(self.template)
            initial = self.template  # read-only and identical to the copy: no second copy needed
        else:
            conn = from_image(image)
            initial = from_image(image)
            initial.execute("PRAGMA query_only = ON")
        return ExecutableInstance(
            self, conn, initial, user_id=self.user_id if user_id is None else user_id, sandbox=sandbox
        )

    def restrict(self, names: Iterable[str]) -> Environment:
        """A view exposing only the tools in `names` (e.g. those the unit-test gate kept).

        Shares the template and version; unknown names are an error.
        """
        keep = list(dict.fromkeys(names))
        unknown = [n for n in keep if n not in self.tool_names]
        if unknown:
            raise KeyError(f"environment {self.name!r} has no tool(s) {', '.join(map(repr, unknown))}")
        view = Environment(
            spec=self.spec,
            path=self.path,
            origin=self.origin,
            version=self.version,
            tools={n: t for n, t in self.tools.items() if n in keep},
            tool_specs=[s for s in self.tool_specs if s.name in keep],
            write_tools=[n for n in self.write_tools if n in keep],
            template=self.template,
            tests=[c for c in self.tests if c.tool in keep],
            declared_tools=None if self.described else keep,
        )
        view._template_layout = self._template_layout
        return view

    def card(self) -> dict[str, Any]:
        """Everything `arena envs show` prints: the env.toml fields and the tools with schemas."""
        return {
            "name": self.name,
            "title": self.title,
            "category": self.category,
            "kind": self.kind,
            "origin": self.origin,
            "version": self.version,
            "path": str(self.path),
            "now": self.now,
            "description": self.description,
            "rules": self.rules,
            "sandboxed": self.sandboxed,
            "tools": [
                {
                    "name": s.name,
                    "writes": s.name in self.write_tools,
                    "description": s.description,
                    "parameters": s.parameters,
                }
                for s in self.tool_specs
            ],
        }

    def __repr__(self) -> str:
        return f"Environment({self.name!r}, kind={self.kind}, version={self.version})"
