"""The packages' direction: `arena` < `simulate` < `curriculum` < `diagnose` < `trainer` < `ops`.

A package never imports one after it, counting imports inside functions and type-checking blocks.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ORDER = ["arena", "simulate", "curriculum", "diagnose", "trainer", "ops"]


def imported_packages(path: Path) -> set[str]:
    """Top-level Arena packages a module imports anywhere in it."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        else:
            continue
        found |= {name.split(".")[0] for name in names} & set(ORDER)
    return found


def test_no_package_imports_one_above_it() -> None:
    upward = []
    for rank, package in enumerate(ORDER):
        above = set(ORDER[rank + 1 :])
        for path in sorted((ROOT / package).rglob("*.py")):
            if wrong := imported_packages(path) & above:
                upward.append(f"{path.relative_to(ROOT)} imports {sorted(wrong)}")
    assert not upward, "\n".join(upward)


def test_the_check_sees_an_import_inside_a_function(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from ops.config import load_config\n    import trainer.grpo\n")
    assert imported_packages(module) == {"ops", "trainer"}
