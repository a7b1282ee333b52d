"""README's settings table lists every configuration key, with its default and description."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from ops.config import ArenaConfig

README = Path(__file__).resolve().parents[2] / "README.md"


def _keys(model: type[BaseModel], prefix: str = "") -> dict[str, Any]:
    """Dotted key -> pydantic field, for every leaf setting."""
    out: dict[str, Any] = {}
    for name, field in model.model_fields.items():
        kind = field.annotation
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            out.update(_keys(kind, f"{prefix}{name}."))
        else:
            out[f"{prefix}{name}"] = field
    return out


def test_every_store_key_has_a_readme_row_with_its_description() -> None:
    rows = {
        m.group(1): m.group(2)
        for m in re.finditer(r"^\| `([a-z_.]+)` \| [^|]* \| [^|]* \| (.*) \|$", README.read_text(), re.M)
    }
    keys = _keys(ArenaConfig)
    missing = sorted(k for k in keys if k not in rows)
    assert not missing, f"settings without a README row: {missing}"
    store = {k: f for k, f in keys.items() if k.startswith("store.keep_")}
    assert len(store) == 6
    for key, field in store.items():
        assert rows[key] == field.description, key
