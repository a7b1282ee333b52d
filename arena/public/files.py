"""An imported benchmark's files: its JSON-lines files read into models (BFCL's entries, τ²'s
tasks), and a new import put in place of the old one."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

M = TypeVar("M", bound=BaseModel)


def read_models(path: Path, model: type[M]) -> list[M]:
    """One `model` per non-empty line of `path`; `ValueError` naming the line that is wrong."""
    out = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            out.append(model.model_validate_json(line))
        except ValidationError as exc:
            raise ValueError(f"{path}:{number}: {exc.errors()[0]['msg']}") from None
    return out


def swap_into_place(staging: Path, dest: Path) -> None:
    """Replace `dest` with the fully written `staging` folder; the old import goes only after."""
    old = dest.with_name(dest.name + ".old")
    shutil.rmtree(old, ignore_errors=True)
    if dest.exists():
        dest.rename(old)
    staging.rename(dest)
    shutil.rmtree(old, ignore_errors=True)
