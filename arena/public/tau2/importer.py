"""`arena envs import-tau2 --from CHECKOUT --domain D`: a τ²-bench domain into `DATA_DIR/public/tau2/D`.

Reads, from a tau2-bench checkout the user supplies (never bundled or downloaded), the domain's
`data/tau2/domains/D/{db.json, policy.md, tasks.json}` (and `split_tasks.json` when there), the
agent's tool schemas from `src/tau2/domains/D/tools.py` and `data_model.py` (read with `ast`,
`arena.public.tau2.tool_docs`), and the checkout's commit (from `.git` by plain file reads). The
new import replaces the old one only once it is complete (written beside it, then renamed), so a
failed import changes nothing.
"""

from __future__ import annotations

import json
import re
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from arena.public.files import swap_into_place
from arena.public.tau2.model import DOMAINS, Tau2Manifest, Tau2Task, load_domain_folder
from arena.public.tau2.tool_docs import ToolDocError, tool_specs
from arena.types import ToolSpec

DATA = Path("data") / "tau2" / "domains"
SOURCE = Path("src") / "tau2" / "domains"
_SHA = re.compile(r"[0-9a-f]{40}")


class CheckoutError(ValueError):
    """The folder is not a usable tau2-bench checkout; the message says what is missing or wrong."""


def checkout_commit(root: Path) -> str | None:
    """The commit checked out at `root` (its `.git`: a folder, or a file naming one), or None."""
    git = Path(root) / ".git"
    if git.is_file():  # a worktree or submodule: "gitdir: <path>"
        text = git.read_text(encoding="utf-8").strip()
        if not text.startswith("gitdir:"):
            return None
        git = (Path(root) / text.split(":", 1)[1].strip()).resolve()
    if not (git / "HEAD").is_file():
        return None
    head = (git / "HEAD").read_text(encoding="utf-8").strip()
    if _SHA.fullmatch(head):  # detached
        return head
    if not head.startswith("ref:"):
        return None
    ref = head.split(":", 1)[1].strip()
    common = git
    if (git / "commondir").is_file():  # a worktree keeps its branches in the main repository
        common = (git / (git / "commondir").read_text(encoding="utf-8").strip()).resolve()
    for base in (git, common):
        loose = base / ref
        if loose.is_file():
            sha = loose.read_text(encoding="utf-8").strip()
            return sha if _SHA.fullmatch(sha) else None
    packed = common / "packed-refs"
    if packed.is_file():
        for line in packed.read_text(encoding="utf-8").splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[1] == ref and _SHA.fullmatch(parts[0]):
                return parts[0]
    return None


def _read_json(path: Path) -> Any:
    if not path.is_file():
        raise CheckoutError(f"{path} is missing")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CheckoutError(f"{path} is not JSON: {exc}") from None


def _domain_files(root: Path, domain: str) -> tuple[Path, Path]:
    if not root.is_dir():
        raise CheckoutError(f"{root}: no such folder")
    if not (root / DATA).is_dir():
        raise CheckoutError(f"{root}: not a tau2-bench checkout (no {DATA} folder here)")
    data, source = root / DATA / domain, root / SOURCE / domain
    if not data.is_dir():
        have = sorted(p.name for p in (root / DATA).iterdir() if p.is_dir())
        raise CheckoutError(f"{root}: no domain {domain!r} in {DATA} (has {', '.join(have) or 'none'})")
    return data, source


def _tasks(path: Path, tool_names: set[str]) -> list[Tau2Task]:
    rows = _read_json(path)
    if not isinstance(rows, list):
        raise CheckoutError(f"{path}: expected a list of tasks")
    tasks: list[Tau2Task] = []
    for number, row in enumerate(rows):
        where = f"{path}: task {number}" + (f" (id {row.get('id')!r})" if isinstance(row, dict) else "")
        try:
            task = Tau2Task.model_validate(row)
        except ValidationError as exc:
            error = exc.errors()[0]
            loc = ".".join(str(p) for p in error["loc"]) or "task"
            raise CheckoutError(f"{where}: {loc}: {error['msg']}") from None
        unknown = [
            a.name
            for a in task.evaluation_criteria.actions
            if a.requestor == "assistant" and a.name not in tool_names
        ]
        if unknown:
            raise CheckoutError(f"{where}: gold actions call tools the domain lacks: {unknown}")
        tasks.append(task)
    ids = [t.id for t in tasks]
    duplicated = sorted({i for i in ids if ids.count(i) > 1})
    if duplicated:
        raise CheckoutError(f"{path}: task ids used more than once: {duplicated}")
    return tasks


def _splits(path: Path, ids: set[str]) -> dict[str, list[str]] | None:
    if not path.is_file():
        return None
    data = _read_json(path)
    if not isinstance(data, dict) or not all(isinstance(v, list) for v in data.values()):
        raise CheckoutError(f"{path}: expected {{split: [task id, ...]}}")
    splits = {name: [str(i) for i in members] for name, members in data.items()}
    for name, members in splits.items():
        unknown = [i for i in members if i not in ids]
        if unknown:
            raise CheckoutError(f"{path}: split {name!r} names tasks tasks.json lacks: {unknown[:5]}")
    return splits


def _tools(source: Path) -> tuple[list[ToolSpec], list[str]]:
    tools_py, model_py = source / "tools.py", source / "data_model.py"
    if not tools_py.is_file():
        raise CheckoutError(f"{tools_py} is missing")
    model_source = model_py.read_text(encoding="utf-8") if model_py.is_file() else None
    try:
        return tool_specs(tools_py.read_text(encoding="utf-8"), model_source)
    except ToolDocError as exc:
        raise CheckoutError(f"{tools_py} {exc}") from None


def _check_db(db: Any, path: Path) -> None:
    if not isinstance(db, dict) or not db:
        raise CheckoutError(f"{path}: expected an object of collections")
    for name, records in db.items():
        if not isinstance(records, dict):
            raise CheckoutError(f"{path}: collection {name!r} is not an object of records")


def import_tau2(source: Path, domain: str, dest: Path) -> Tau2Manifest:
    """Import `domain` from the checkout at `source` into the folder `dest`; returns what was imported.

    Raises `CheckoutError` naming what is missing or broken (nothing in `dest` changes then).
    """
    if domain not in DOMAINS:
        raise CheckoutError(f"unknown τ² domain {domain!r} (importable: {', '.join(DOMAINS)})")
    root = Path(source).expanduser().absolute()
    data, code = _domain_files(root, domain)
    _check_db(_read_json(data / "db.json"), data / "db.json")
    db_raw = (data / "db.json").read_bytes()
    if not (data / "policy.md").is_file():
        raise CheckoutError(f"{data / 'policy.md'} is missing")
    policy = (data / "policy.md").read_text(encoding="utf-8")
    specs, notes = _tools(code)
    tasks = _tasks(data / "tasks.json", {s.name for s in specs})
    splits = _splits(data / "split_tasks.json", {t.id for t in tasks})
    manifest = Tau2Manifest(
        domain=domain,
        source=str(root),
        commit=checkout_commit(root),
        imported_at=datetime.now(UTC).isoformat(timespec="seconds"),
        tasks=len(tasks),
        tools=[s.name for s in specs],
        splits=splits,
        notes=notes,
    )
    dest = Path(dest).expanduser().absolute()
    dest.parent.mkdir(parents=True, exist_ok=True)
    staging = dest.with_name(dest.name + ".importing")
    shutil.rmtree(staging, ignore_errors=True)
    try:
        staging.mkdir()
        (staging / "db.json").write_bytes(db_raw)
        (staging / "policy.md").write_text(policy, encoding="utf-8")
        tools = [s.model_dump() for s in specs]
        (staging / "tools.json").write_text(json.dumps(tools, indent=1), encoding="utf-8")
        lines = "".join(t.model_dump_json() + "\n" for t in tasks)
        (staging / "tasks.jsonl").write_text(lines, encoding="utf-8")
        (staging / "manifest.json").write_text(manifest.model_dump_json(indent=2), encoding="utf-8")
        load_domain_folder(staging)  # everything written reads back
        swap_into_place(staging, dest)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return manifest
