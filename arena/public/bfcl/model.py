"""An imported BFCL multi-turn benchmark: its entries, tool schemas, backend and provenance.

`arena envs import-bfcl` writes `DATA_DIR/public/bfcl/` (`arena.public.bfcl.importer`):

    manifest.json        distribution, version, source path, entry counts per category
    tools.json           {class: [tool schema, ...]} from BFCL's function docs
    backend/             the backend classes' modules and `backend.json` (`arena.env.objects`)
    entries/<cat>.jsonl  one `BfclEntry` per line (prompt turns and ground truth together)

Each category is one held-out environment (`bfcl_<category>`), each entry one task whose id is
BFCL's entry id.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from arena.env.objects import BackendSource, read_backend
from arena.public.files import read_models
from arena.types import ToolSpec

SUBDIR = Path("public") / "bfcl"
MAX_STEPS_PER_TURN = 20  # BFCL's own cap on the steps of one turn; one more and the entry ends failed


class BfclManifest(BaseModel):
    """Where an import came from: the distribution and its version, and what it holds."""

    benchmark: str = "bfcl"
    distribution: str = "bfcl-eval"
    version: str
    source: str
    imported_at: str
    categories: dict[str, int]
    classes: list[str]


class BfclEntry(BaseModel):
    """One multi-turn entry: the user's turns, the initial state, the ground truth per turn."""

    model_config = ConfigDict(extra="forbid")

    id: str
    category: str
    turns: list[list[dict[str, Any]]] = Field(
        description="The user's messages per turn ([]: a holdout turn)."
    )
    initial_config: dict[str, Any] = Field(default_factory=dict)
    involved_classes: list[str]
    missed_function: dict[int, list[str]] = Field(
        default_factory=dict, description="Turn -> functions held out until that turn (miss_func)."
    )
    ground_truth: list[list[str]]

    @model_validator(mode="after")
    def _same_turns(self) -> BfclEntry:
        if len(self.turns) != len(self.ground_truth):
            raise ValueError(
                f"{len(self.turns)} prompt turns but {len(self.ground_truth)} ground-truth turns"
            )
        return self

    @property
    def long_context(self) -> bool:
        """Whether the backend loads its long states (BFCL: the long-context categories)."""
        return "long_context" in self.category

    @property
    def env(self) -> str:
        """The held-out environment of the entry's category."""
        return env_name(self.category)


def env_name(category: str) -> str:
    """`base` -> `bfcl_base`: a category's environment name."""
    return f"bfcl_{category}"


_OPENAPI_TYPES = {"dict": "object", "float": "number", "tuple": "array", "list": "array", "any": "string"}


def _schema(node: Any) -> Any:
    """A BFCL parameter schema as JSON schema (its `dict`/`float`/`tuple` type names mapped)."""
    if isinstance(node, dict):
        out = {k: _schema(v) for k, v in node.items()}
        if isinstance(out.get("type"), str):
            out["type"] = _OPENAPI_TYPES.get(out["type"], out["type"])
        return out
    if isinstance(node, list):
        return [_schema(v) for v in node]
    return node


def tool_spec(doc: dict[str, Any]) -> ToolSpec:
    """A BFCL function doc as a tool schema (its `response` part is not shown to the agent)."""
    parameters = _schema(doc.get("parameters") or {"type": "dict", "properties": {}})
    return ToolSpec(name=doc["name"], description=doc.get("description", ""), parameters=parameters)


class BfclBenchmark:
    """An imported benchmark folder, validated; read it with `load_benchmark`."""

    def __init__(
        self,
        folder: Path,
        manifest: BfclManifest,
        tools: dict[str, list[ToolSpec]],
        entries: dict[str, list[BfclEntry]],
    ) -> None:
        self.folder = folder
        self.manifest = manifest
        self.tools = tools
        self.entries = entries
        self._by_id = {e.id: e for rows in entries.values() for e in rows}

    @property
    def version(self) -> str:
        """The bfcl-eval version the entries came from."""
        return self.manifest.version

    @property
    def backend_dir(self) -> Path:
        """The folder of the backend modules (`arena.env.objects.read_backend`)."""
        return self.folder / "backend"

    def backend(self) -> BackendSource:
        """The backend's sources."""
        return read_backend(self.backend_dir)

    def entry(self, entry_id: str) -> BfclEntry:
        """One entry by its BFCL id; `KeyError` naming it when unknown."""
        if entry_id not in self._by_id:
            raise KeyError(f"no BFCL entry {entry_id!r}")
        return self._by_id[entry_id]

    def tools_at(self, entry: BfclEntry, turn: int) -> list[ToolSpec]:
        """The tools the agent sees in `turn`: its classes' functions, held-out ones from their turn."""
        held = {name: t for t, names in entry.missed_function.items() for name in names}
        shown = [
            spec
            for cls in entry.involved_classes
            for spec in self.tools.get(cls, [])
            if spec.name not in held or held[spec.name] <= turn
        ]
        # A function given back later comes after the others, as BFCL appends it.
        late = [s for s in shown if s.name in held]
        early = [s for s in shown if s.name not in held]
        return early + sorted(late, key=lambda s: held[s.name])


def read_entries(path: Path) -> list[BfclEntry]:
    """The entries of one category file; `ValueError` naming the line that is wrong."""
    return read_models(path, BfclEntry)


@functools.lru_cache(maxsize=4)
def _load(folder: Path, stamp: float) -> BfclBenchmark:
    manifest = BfclManifest.model_validate_json((folder / "manifest.json").read_text(encoding="utf-8"))
    raw_tools = (folder / "tools.json").read_text(encoding="utf-8")
    tools = {
        cls: [ToolSpec.model_validate(t) for t in specs]
        for cls, specs in _json_object(raw_tools, folder / "tools.json").items()
    }
    entries = {cat: read_entries(folder / "entries" / f"{cat}.jsonl") for cat in manifest.categories}
    return BfclBenchmark(folder, manifest, tools, entries)


def _json_object(text: str, where: Path) -> dict[str, Any]:
    data = json.loads(text)
    if not isinstance(data, dict):
        raise ValueError(f"{where}: expected a JSON object")
    return data


def load_benchmark(folder: Path) -> BfclBenchmark:
    """The imported benchmark in `folder` (cached until its manifest changes).

    Raises `FileNotFoundError` when nothing was imported there and `ValueError` when a file is
    broken, each naming the file.
    """
    folder = Path(folder).expanduser().absolute()
    manifest = folder / "manifest.json"
    if not manifest.is_file():
        raise FileNotFoundError(f"no BFCL import in {folder}: run `arena envs import-bfcl --from WHEEL`")
    try:
        return _load(folder, manifest.stat().st_mtime)
    except (OSError, ValueError) as exc:
        raise ValueError(f"{folder}: the BFCL import is broken ({exc}); import it again") from None
