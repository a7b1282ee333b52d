"""`arena envs import-bfcl --from PATH`: a bfcl-eval distribution into `DATA_DIR/public/bfcl`.

Reads the four v4 multi-turn categories (`base`, `miss_func`, `miss_param`, `long_context`), joins
each entry with its ground truth, turns the function docs of the classes they involve into tool
schemas, copies those classes' modules (and the modules they import) with a `backend.json`, and
records the distribution's version. The new import replaces the old one only once it is
complete (written beside it, then renamed), so a failed import loses nothing.
"""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from arena.env.objects import MANIFEST, Backend, BackendManifest, read_backend
from arena.public.bfcl.dist import (
    CATEGORIES,
    Distribution,
    DistributionError,
    backend_config,
    backend_modules,
)
from arena.public.bfcl.model import BfclEntry, BfclManifest, load_benchmark, tool_spec
from arena.public.files import swap_into_place

SETUP_METHOD = "_load_scenario"  # how BFCL's harness loads a class's initial configuration
# Imported by a backend module but never used by the multi-turn classes; the sandbox forbids it.
UNAVAILABLE = ["subprocess"]


def _entries(dist: Distribution, category: str) -> list[BfclEntry]:
    prompts = dist.json_lines(f"data/BFCL_v4_multi_turn_{category}.json")
    truth = {
        row["id"]: row["ground_truth"]
        for row in dist.json_lines(f"data/possible_answer/BFCL_v4_multi_turn_{category}.json")
    }
    out = []
    for row in prompts:
        if row["id"] not in truth:
            raise DistributionError(f"{dist.path}: entry {row['id']} has no ground truth")
        try:
            out.append(
                BfclEntry(
                    id=row["id"],
                    category=category,
                    turns=row["question"],
                    initial_config=row.get("initial_config") or {},
                    involved_classes=row["involved_classes"],
                    missed_function=row.get("missed_function") or {},
                    ground_truth=truth[row["id"]],
                )
            )
        except (ValidationError, KeyError) as exc:
            raise DistributionError(f"{dist.path}: entry {row.get('id')}: {exc}") from None
    return out


def _tools(
    dist: Distribution, classes: list[str], doc_files: dict[str, str]
) -> dict[str, list[dict[str, Any]]]:
    out = {}
    for cls in classes:
        if cls not in doc_files:
            raise DistributionError(f"{dist.path}: no function doc file for class {cls}")
        docs = dist.json_lines(f"data/multi_turn_func_doc/{doc_files[cls]}")
        out[cls] = [tool_spec(doc).model_dump() for doc in docs]
    return out


def _write_backend(
    folder: Path, modules: dict[str, str], classes: dict[str, str], stateless: list[str]
) -> None:
    folder.mkdir(parents=True)
    files: dict[str, str] = {}
    for name, source in sorted(modules.items()):
        file = name.rsplit(".", 1)[-1] + ".py"
        if file in files.values():
            file = name.replace(".", "_") + ".py"
        (folder / file).write_text(source, encoding="utf-8")
        files[name] = file
    manifest = BackendManifest(
        modules=files,
        classes=classes,
        setup=SETUP_METHOD,
        stateless=[c for c in stateless if c in classes],
        unavailable=UNAVAILABLE,
    )
    (folder / MANIFEST).write_text(manifest.model_dump_json(indent=2), encoding="utf-8")


def import_bfcl(source: Path, dest: Path) -> BfclManifest:
    """Import the distribution at `source` into `dest`; returns what was imported.

    Raises `DistributionError` naming what is missing or broken (nothing in `dest` changes then).
    """
    dist = Distribution(source)
    try:
        entries = {cat: _entries(dist, cat) for cat in CATEGORIES}
        config = backend_config(dist)
        classes = sorted({c for rows in entries.values() for e in rows for c in e.involved_classes})
        mapping: dict[str, str] = config["CLASS_FILE_PATH_MAPPING"]
        unknown = [c for c in classes if c not in mapping]
        if unknown:
            raise DistributionError(f"{dist.path}: entries use classes with no module: {unknown}")
        modules = backend_modules(dist, [mapping[c] for c in classes])
        tools = _tools(dist, classes, config["MULTI_TURN_FUNC_DOC_FILE_MAPPING"])
    finally:
        dist.close()
    dest = Path(dest).expanduser().absolute()
    staging = dest.with_name(dest.name + ".importing")
    shutil.rmtree(staging, ignore_errors=True)
    try:
        _write_backend(
            staging / "backend", modules, {c: mapping[c] for c in classes}, config["STATELESS_CLASSES"]
        )
        _check_backend(staging / "backend")
        (staging / "tools.json").write_text(json.dumps(tools, indent=1), encoding="utf-8")
        (staging / "entries").mkdir()
        for cat, rows in entries.items():
            lines = "".join(e.model_dump_json() + "\n" for e in rows)
            (staging / "entries" / f"{cat}.jsonl").write_text(lines, encoding="utf-8")
        manifest = BfclManifest(
            version=dist.version,
            source=str(Path(source).expanduser().absolute()),
            imported_at=datetime.now(UTC).isoformat(timespec="seconds"),
            categories={cat: len(rows) for cat, rows in entries.items()},
            classes=classes,
        )
        (staging / "manifest.json").write_text(manifest.model_dump_json(indent=2), encoding="utf-8")
        load_benchmark(staging)  # everything written reads back
        swap_into_place(staging, dest)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return manifest


def _check_backend(folder: Path) -> None:
    """Every class loads from the copied modules (in this process: the user vouches for the code)."""
    source = read_backend(folder)
    try:
        backend = Backend(source)
    except Exception as exc:  # whatever the third-party module raised, named
        raise DistributionError(f"the backend classes do not load: {type(exc).__name__}: {exc}") from None
    missing = [
        c
        for c in source.classes
        if c not in source.stateless and not hasattr(backend.classes[c], SETUP_METHOD)
    ]
    if missing:
        raise DistributionError(f"classes without {SETUP_METHOD}: {missing}")
