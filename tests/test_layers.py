"""The packages' direction: `arena` < `simulate` < `curriculum` < `diagnose` < `work` < `trainer` < `ops`.

A package never imports one after it, and no two modules inside a package import each other, even
through others, counting imports inside functions and type-checking blocks (a package's `__init__`
is a module of its own here).
"""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parents[1]
ORDER = ["arena", "simulate", "curriculum", "diagnose", "work", "trainer", "ops"]


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


def test_the_work_layer_imports_neither_the_trainer_nor_the_daemon() -> None:
    """`work` runs the same jobs in the daemon and on a Ray worker: it never needs `trainer` or `ops`."""
    wrong = {
        str(path.relative_to(ROOT)): sorted(found)
        for path in sorted((ROOT / "work").rglob("*.py"))
        if (found := imported_packages(path) & {"trainer", "ops"})
    }
    assert (ROOT / "work" / "episode.py").is_file() and wrong == {}


def test_the_check_sees_an_import_inside_a_function(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from ops.config import load_config\n    import trainer.grpo\n")
    assert imported_packages(module) == {"ops", "trainer"}


def package_modules(root: Path, package: str) -> dict[str, Path]:
    """Every module of `package` (a folder under `root`) by dotted name; `__init__` is the package's."""
    modules = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def imported_names(name: str, path: Path) -> set[str]:
    """Dotted names a module imports anywhere in it; `from x import y` names `x` and `x.y`."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            found |= {module} | {f"{module}.{alias.name}" for alias in node.names}
    return found


def import_graph(root: Path, package: str) -> nx.DiGraph:
    """Modules of `package` and which imports which (a name resolves to its closest module)."""
    modules = package_modules(root, package)
    graph = nx.DiGraph()
    graph.add_nodes_from(modules)
    for name, path in modules.items():
        for target in imported_names(name, path):
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name:
                graph.add_edge(name, target)
    return graph


def import_cycles(root: Path, package: str) -> list[list[str]]:
    """Groups of modules of `package` that import each other, directly or through others."""
    graph = import_graph(root, package)
    return sorted(sorted(c) for c in nx.strongly_connected_components(graph) if len(c) > 1)


@pytest.mark.parametrize("package", ORDER)
def test_no_import_cycle_inside_a_package(package: str) -> None:
    cycles = import_cycles(ROOT, package)
    assert not cycles, "\n".join(" <-> ".join(cycle) for cycle in cycles)


CYCLES = {
    "inside a function": {
        "a.py": "from pkg.b import g\n",
        "b.py": "def g():\n    from pkg import a\n",
    },
    "in a type-checking block, relative": {
        "a.py": "from .b import g\n",
        "b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import X\n",
    },
    "through the package's __init__": {
        "__init__.py": "def __getattr__(name):\n    from pkg.a import A\n    return A\n",
        "a.py": "from pkg import b\n",
    },
}


def write_package(root: Path, files: dict[str, str]) -> None:
    (root / "pkg").mkdir()
    for name, text in {"__init__.py": "", **files}.items():
        (root / "pkg" / name).write_text(text)


@pytest.mark.parametrize("files", CYCLES.values(), ids=CYCLES.keys())
def test_the_check_sees_a_cycle(tmp_path: Path, files: dict[str, str]) -> None:
    write_package(tmp_path, {"b.py": "", **files})
    assert import_cycles(tmp_path, "pkg")


def test_imports_one_way_are_no_cycle(tmp_path: Path) -> None:
    write_package(
        tmp_path,
        {
            "__init__.py": "def __getattr__(name):\n    from pkg.a import A\n    return A\n",
            "a.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .b import B\n",
            "b.py": "import pkg.c\n",
            "c.py": "",
        },
    )
    assert set(import_graph(tmp_path, "pkg").edges) == {
        ("pkg", "pkg.a"),
        ("pkg.a", "pkg.b"),
        ("pkg.b", "pkg.c"),
    }
    assert not import_cycles(tmp_path, "pkg")


def test_the_daemon_imports_no_cli_command() -> None:
    """`ops.commands` are the CLI's leaves: the daemon, its phases and its services never import one."""
    graph = import_graph(ROOT, "ops")
    leaves = {"ops.cli", "ops.__main__"}
    offenders = sorted(
        (module, target)
        for module, target in graph.edges
        if target.startswith("ops.commands")
        and not module.startswith("ops.commands")
        and module not in leaves
    )
    assert offenders == []


def test_the_cluster_worker_runs_work_without_a_phase_context() -> None:
    """A Ray worker runs jobs through `work` with its own models and environments: it imports no
    phase context (`ops.phases.base`) and not the daemon's evaluation runner."""
    graph = import_graph(ROOT, "ops")
    assert not {"ops.phases.base", "ops.phases.eval_runner"} & set(graph.successors("ops.cluster.worker"))
