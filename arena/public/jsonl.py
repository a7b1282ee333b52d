"""Reading an imported benchmark's JSON-lines files (BFCL's entries, τ²'s tasks) into models."""

from __future__ import annotations

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
