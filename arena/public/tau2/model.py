"""An imported τ²-bench domain: its tasks, policy, tool schemas, database and provenance.

`arena envs import-tau2 --domain D` writes `DATA_DIR/public/tau2/D/` (`arena.public.tau2.importer`):

    manifest.json   where it came from (checkout, commit), when, how many tasks, the tools, splits
    db.json         the domain's database, as in the checkout
    policy.md       the agent's policy
    tools.json      the agent's tool schemas (Arena `ToolSpec`s, τ²'s text)
    tasks.jsonl     one `Tau2Task` per line

The task model follows τ²'s own (`Task` and its parts), keeping what running and scoring a task
needs; τ²'s bookkeeping fields (annotations, issues) are dropped.
"""

from __future__ import annotations

import functools
import importlib
import json
import textwrap
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from arena.public.files import read_models
from arena.public.tau2.docstore import DocStore
from arena.public.tau2.domains import domain_port
from arena.types import ToolSpec

SUBDIR = Path("public") / "tau2"
DOMAINS = ("retail", "airline")
REWARD_TYPES = ("DB", "ENV_ASSERTION", "NL_ASSERTION", "ACTION", "COMMUNICATE")
RewardType = Literal["DB", "ENV_ASSERTION", "NL_ASSERTION", "ACTION", "COMMUNICATE"]


class Tau2Manifest(BaseModel):
    """Where an import came from (the checkout and its commit) and what it holds."""

    benchmark: str = "tau2"
    domain: str
    source: str = Field(description="The tau2-bench checkout imported from.")
    commit: str | None = Field(description="The checkout's HEAD commit; null when not a git checkout.")
    imported_at: str
    tasks: int
    tools: list[str]
    splits: dict[str, list[str]] | None = Field(
        default=None, description="The checkout's task splits (split_tasks.json), when it has them."
    )
    notes: list[str] = Field(default_factory=list, description="What the tool schemas could not type.")


class _Part(BaseModel):
    model_config = ConfigDict(extra="ignore")


class StructuredInstructions(_Part):
    """The user's situation: why they call, what they know and don't, how to behave."""

    domain: str
    reason_for_call: str
    known_info: str | None = None
    unknown_info: str | None = None
    task_instructions: str

    def render(self) -> str:
        """The instructions as τ²'s user simulator reads them."""
        lines = [f"Domain: {self.domain}", f"Reason for call:\n{_tab(self.reason_for_call)}"]
        if self.known_info is not None:
            lines.append(f"Known info:\n{_tab(self.known_info)}")
        if self.unknown_info is not None:
            lines.append(f"Unknown info:\n{_tab(self.unknown_info)}")
        lines.append(f"Task instructions:\n{_tab(self.task_instructions)}")
        return "\n".join(lines)


class UserScenario(_Part):
    """Everything the user simulator is told."""

    persona: str | None = None
    instructions: StructuredInstructions | str


class GoldAction(_Part):
    """One call of the reference solution (`requestor` says whose tool it is)."""

    action_id: str
    requestor: Literal["assistant", "user"] = "assistant"
    name: str
    arguments: dict[str, Any]
    info: str | None = None
    compare_args: list[str] | None = Field(
        default=None, description="The arguments an ACTION check compares; None: τ²'s default rule."
    )


class InitialState(_Part):
    """What the episode starts from besides the template database."""

    initialization_data: dict[str, Any] | None = Field(
        default=None, description="{agent_data, user_data}: merged into the databases."
    )
    initialization_actions: list[dict[str, Any]] | None = Field(
        default=None, description="{env_type, func_name, arguments} calls run before the episode."
    )
    message_history: list[dict[str, Any]] | None = Field(
        default=None, description="Messages already exchanged; their write calls are replayed."
    )


class EvaluationCriteria(_Part):
    """How a run is scored: the reference actions, the facts to say, the judged assertions, the basis."""

    actions: list[GoldAction] = Field(default_factory=list)
    communicate_info: list[str] = Field(default_factory=list)
    nl_assertions: list[str] = Field(default_factory=list)
    env_assertions: list[dict[str, Any]] = Field(default_factory=list)
    reward_basis: list[RewardType] = Field(default_factory=lambda: ["DB", "COMMUNICATE"])
    db_reference: bool = Field(
        default=True,
        description="False when the task gives neither actions nor env_assertions: τ² then passes "
        "the DB check without comparing anything.",
    )

    @model_validator(mode="before")
    @classmethod
    def _nulls(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = dict(data)
        if "db_reference" not in data:
            data["db_reference"] = not (data.get("actions") is None and data.get("env_assertions") is None)
        for key in ("actions", "communicate_info", "nl_assertions", "env_assertions"):
            if data.get(key) is None:
                data.pop(key, None)
        if data.get("reward_basis") is None:
            data.pop("reward_basis", None)
        return data


class Tau2Task(_Part):
    """One τ² task: the user's scenario, the state it starts from, how it is scored."""

    id: str
    description: dict[str, Any] | None = None
    user_scenario: UserScenario
    initial_state: InitialState | None = None
    evaluation_criteria: EvaluationCriteria = Field(default_factory=EvaluationCriteria)

    @field_validator("id", mode="before")
    @classmethod
    def _id_text(cls, value: Any) -> Any:
        return str(value) if isinstance(value, int) and not isinstance(value, bool) else value

    @field_validator("evaluation_criteria", mode="before")
    @classmethod
    def _no_criteria(cls, value: Any) -> Any:
        # τ² scores a task without criteria 1.0; these defaults score the same (no reference, nothing to say).
        return {"reward_basis": ["DB", "COMMUNICATE"]} if value is None else value

    def user_instructions(self) -> str:
        """The scenario as τ²'s user simulator is given it (persona, then instructions)."""
        lines = []
        if self.user_scenario.persona is not None:
            lines += ["Persona:", _tab(self.user_scenario.persona)]
        instructions = self.user_scenario.instructions
        text = instructions.render() if isinstance(instructions, StructuredInstructions) else instructions
        lines += ["Instructions:", _tab(text)]
        return "\n".join(lines)


def _tab(text: str) -> str:
    return textwrap.indent(text, "\t")


class Tau2Domain:
    """An imported domain folder, validated; read it with `load_domain`."""

    def __init__(
        self,
        folder: Path,
        manifest: Tau2Manifest,
        policy: str,
        tasks: list[Tau2Task],
        tool_specs: list[ToolSpec],
    ) -> None:
        self.folder = folder
        self.manifest = manifest
        self.policy = policy
        self.tasks = tasks
        self.tool_specs = tool_specs
        self._by_id = {t.id: t for t in tasks}

    @property
    def name(self) -> str:
        """The τ² domain (`retail`, `airline`)."""
        return self.manifest.domain

    def task(self, task_id: str) -> Tau2Task:
        """One task by its τ² id; `KeyError` naming it when unknown."""
        if task_id not in self._by_id:
            raise KeyError(f"no τ² {self.name} task {task_id!r}")
        return self._by_id[task_id]

    def split(self, name: str) -> list[Tau2Task]:
        """The tasks of one of the checkout's splits (`train`, `test`, `base`); `KeyError` if none."""
        splits = self.manifest.splits or {}
        if name not in splits:
            raise KeyError(f"the {self.name} import has no split {name!r} (has {sorted(splits)})")
        return [self._by_id[i] for i in splits[name]]

    def db(self) -> dict[str, Any]:
        """The database as imported (τ²'s `db.json`)."""
        return json.loads((self.folder / "db.json").read_text(encoding="utf-8"))

    def template(self) -> DocStore:
        """The database as the domain port stores it (shared: `copy()` it before writing)."""
        db_file = self.folder / "db.json"
        return _template(db_file, db_file.stat().st_mtime, domain_port(self.name).__name__)


@functools.lru_cache(maxsize=4)
def _template(db_file: Path, stamp: float, port_module: str) -> DocStore:
    port = importlib.import_module(port_module)
    data = json.loads(db_file.read_text(encoding="utf-8"))
    ordered = {c: data[c] for c in port.COLLECTIONS if c in data}  # τ²'s model order
    return DocStore.from_data(ordered, port.normalize)


def read_tasks(path: Path) -> list[Tau2Task]:
    """The tasks of a `tasks.jsonl`; `ValueError` naming the line that is wrong."""
    return read_models(path, Tau2Task)


@functools.lru_cache(maxsize=8)
def _load(folder: Path, stamp: float) -> Tau2Domain:
    manifest = Tau2Manifest.model_validate_json((folder / "manifest.json").read_text(encoding="utf-8"))
    specs = json.loads((folder / "tools.json").read_text(encoding="utf-8"))
    if not isinstance(specs, list):
        raise ValueError(f"{folder / 'tools.json'}: expected a list of tool schemas")
    tools = [ToolSpec.model_validate(s) for s in specs]
    policy = (folder / "policy.md").read_text(encoding="utf-8")
    tasks = read_tasks(folder / "tasks.jsonl")
    json.loads((folder / "db.json").read_text(encoding="utf-8"))  # it parses
    return Tau2Domain(folder, manifest, policy, tasks, tools)


def load_domain_folder(folder: Path) -> Tau2Domain:
    """The imported domain in `folder` (cached until its manifest changes).

    Raises `FileNotFoundError` when nothing was imported there and `ValueError` when a file is
    broken, each naming the folder.
    """
    folder = Path(folder).expanduser().absolute()
    manifest = folder / "manifest.json"
    if not manifest.is_file():
        raise FileNotFoundError(
            f"no τ² import in {folder}: run `arena envs import-tau2 --from CHECKOUT --domain {folder.name}`"
        )
    try:
        return _load(folder, manifest.stat().st_mtime)
    except (OSError, ValueError) as exc:
        raise ValueError(f"{folder}: the τ² import is broken ({exc}); import it again") from None


def load_domain(data_dir: Path, domain: str) -> Tau2Domain:
    """The domain imported under `DATA_DIR` (`DATA_DIR/public/tau2/<domain>`)."""
    return load_domain_folder(Path(data_dir) / SUBDIR / domain)
