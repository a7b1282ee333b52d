"""Reading a `bfcl-eval` distribution the user supplies: a wheel, or an installed package folder.

Nothing of it is imported here. The files are read as files (from the wheel's zip or the folder):
the multi-turn entries and their ground truth, the function docs, the backend classes' modules
(`eval_checker/multi_turn_eval/func_source_code/*.py`) and the class mapping in
`constants/executable_backend_config.py`, which is read with `ast` (its few f-strings join string
constants). The backend modules that the multi-turn classes need are found by following their
imports of each other, so none of bfcl's own dependencies (numpy, torch through
sentence-transformers, ...) is ever loaded.
"""

from __future__ import annotations

import ast
import json
import re
import zipfile
from pathlib import Path
from typing import Any

PACKAGE = "bfcl_eval"
CATEGORIES = ("base", "miss_func", "miss_param", "long_context")
BACKEND_CONFIG = "constants/executable_backend_config.py"


class DistributionError(ValueError):
    """The path is not a usable bfcl-eval distribution; the message says what is missing."""


class Distribution:
    """Files of one bfcl-eval distribution, by their path inside the `bfcl_eval` package."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path).expanduser()
        self._zip: zipfile.ZipFile | None = None
        self._root: Path | None = None
        if self.path.is_file():
            if not zipfile.is_zipfile(self.path):
                raise DistributionError(f"{self.path}: not a wheel (a .whl is a zip archive)")
            self._zip = zipfile.ZipFile(self.path)
            self.version = self._wheel_version()
        elif self.path.is_dir():
            self._root = self._package_dir(self.path)
            self.version = self._installed_version(self._root)
        else:
            raise DistributionError(f"{self.path}: no such file or folder")

    def _package_dir(self, path: Path) -> Path:
        for candidate in (path, path / PACKAGE):
            if (candidate / BACKEND_CONFIG).is_file():
                return candidate
        raise DistributionError(
            f"{path}: no {PACKAGE}/{BACKEND_CONFIG} here: give a bfcl-eval wheel, the installed "
            f"{PACKAGE} folder or the site-packages folder holding it"
        )

    def _wheel_version(self) -> str:
        assert self._zip is not None
        for name in self._zip.namelist():
            if re.fullmatch(r"bfcl_eval-[^/]+\.dist-info/METADATA", name):
                return _metadata_version(self._zip.read(name).decode("utf-8", "replace"), name)
        raise DistributionError(f"{self.path}: the wheel has no bfcl_eval-*.dist-info/METADATA")

    def _installed_version(self, root: Path) -> str:
        infos = sorted(root.parent.glob("bfcl_eval-*.dist-info")) + sorted(
            root.parent.glob("bfcl_eval-*.egg-info")
        )
        for info in infos:
            for meta in (info / "METADATA", info / "PKG-INFO"):
                if meta.is_file():
                    return _metadata_version(meta.read_text(encoding="utf-8", errors="replace"), str(meta))
        raise DistributionError(
            f"{root}: no bfcl_eval-*.dist-info beside it, so its version is unknown: give the wheel, or "
            "the site-packages folder pip installed it into"
        )

    def read(self, relative: str) -> bytes:
        """The bytes of `bfcl_eval/<relative>`; raises `DistributionError` when it is missing."""
        try:
            if self._zip is not None:
                return self._zip.read(f"{PACKAGE}/{relative}")
            assert self._root is not None
            return (self._root / relative).read_bytes()
        except (KeyError, OSError):
            raise DistributionError(f"{self.path}: {PACKAGE}/{relative} is missing") from None

    def text(self, relative: str) -> str:
        """`read` as UTF-8 text."""
        return self.read(relative).decode("utf-8")

    def json_lines(self, relative: str) -> list[dict[str, Any]]:
        """A JSON-lines file of the distribution (BFCL's data files)."""
        try:
            return [json.loads(line) for line in self.text(relative).splitlines() if line.strip()]
        except json.JSONDecodeError as exc:
            raise DistributionError(f"{self.path}: {PACKAGE}/{relative}: not JSON lines ({exc})") from None

    def close(self) -> None:
        """Close the wheel, if one is open."""
        if self._zip is not None:
            self._zip.close()


def _metadata_version(text: str, where: str) -> str:
    match = re.search(r"^Version:\s*(\S+)\s*$", text, re.MULTILINE)
    if match is None:
        raise DistributionError(f"{where}: no Version line")
    return match.group(1)


def _static_value(node: ast.expr, names: dict[str, Any]) -> Any:
    """A constant expression of the backend config: literals, names bound before, f-strings of them."""
    if isinstance(node, ast.Name):
        return names[node.id]
    if isinstance(node, ast.JoinedStr):
        parts = []
        for value in node.values:
            inner = value.value if isinstance(value, ast.FormattedValue) else value
            parts.append(str(_static_value(inner, names)))
        return "".join(parts)
    if isinstance(node, ast.Dict):
        return {
            _static_value(k, names): _static_value(v, names)
            for k, v in zip(node.keys, node.values, strict=True)
            if k
        }
    if isinstance(node, ast.List | ast.Tuple):
        return [_static_value(e, names) for e in node.elts]
    return ast.literal_eval(node)


def backend_config(dist: Distribution) -> dict[str, Any]:
    """The constants of `executable_backend_config.py`, read without running it."""
    names: dict[str, Any] = {}
    try:
        tree = ast.parse(dist.text(BACKEND_CONFIG))
        for stmt in tree.body:
            if (
                isinstance(stmt, ast.Assign)
                and len(stmt.targets) == 1
                and isinstance(stmt.targets[0], ast.Name)
            ):
                names[stmt.targets[0].id] = _static_value(stmt.value, names)
    except (SyntaxError, ValueError, KeyError) as exc:
        raise DistributionError(f"{dist.path}: cannot read {BACKEND_CONFIG} statically ({exc!r})") from None
    for key in ("CLASS_FILE_PATH_MAPPING", "MULTI_TURN_FUNC_DOC_FILE_MAPPING", "STATELESS_CLASSES"):
        if key not in names:
            raise DistributionError(f"{dist.path}: {BACKEND_CONFIG} has no {key}")
    return names


def module_file(module: str) -> str:
    """`bfcl_eval.a.b` -> `a/b.py`: a backend module's path inside the package."""
    parts = module.split(".")
    if parts[0] != PACKAGE or len(parts) < 2:
        raise DistributionError(f"backend module {module!r} is not inside {PACKAGE}")
    return "/".join(parts[1:]) + ".py"


def backend_modules(dist: Distribution, roots: list[str]) -> dict[str, str]:
    """The sources of `roots` and of every `bfcl_eval` module they import, by import name."""
    found: dict[str, str] = {}
    pending = list(roots)
    while pending:
        module = pending.pop()
        if module in found:
            continue
        found[module] = source = dist.text(module_file(module))
        for node in ast.walk(ast.parse(source)):
            if (
                isinstance(node, ast.ImportFrom)
                and node.level == 0
                and (node.module or "").startswith(PACKAGE + ".")
            ):
                pending.append(str(node.module))
            elif isinstance(node, ast.Import):
                pending += [a.name for a in node.names if a.name.startswith(PACKAGE + ".")]
    return found
