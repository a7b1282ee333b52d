"""Finding environments: the bundled set plus every folder on the environment path.

The environment path comes from `--env-path` and `ARENA_ENV_PATH` (`:`-separated). Each entry is
either one environment folder (it has an env.toml) or a parent of environment folders. Later
entries override earlier ones and every entry overrides a bundled environment of the same name.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Iterable, Sequence
from pathlib import Path

import structlog

from arena.env.errors import EnvLoadError, Problem
from arena.env.loader import BUNDLED_ROOT, is_env_dir, load_environment
from arena.env.runtime import Environment

__all__ = [
    "Registry",
    "bundled_env_dirs",
    "check_env_path",
    "discover",
    "load_environment",  # re-exported: the contract names it here
    "split_env_path",
]

log = structlog.get_logger(__name__)


def bundled_env_dirs() -> list[Path]:
    """The bundled environment folders (`arena/env/bundled/*/` with an env.toml), sorted."""
    if not BUNDLED_ROOT.is_dir():
        return []
    return sorted(p for p in BUNDLED_ROOT.iterdir() if p.is_dir() and is_env_dir(p))


def split_env_path(values: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """Entries of `--env-path` values / `ARENA_ENV_PATH`, each possibly `:`-separated."""
    out: list[Path] = []
    for value in values:
        out.extend(Path(part).expanduser() for part in str(value).split(os.pathsep) if part.strip())
    return out


def env_path_from_environ() -> list[Path]:
    """`ARENA_ENV_PATH` as a list of folders."""
    raw = os.environ.get("ARENA_ENV_PATH", "")
    return split_env_path([raw]) if raw else []


def env_dirs_in(entry: Path) -> list[Path]:
    """The environment folders an env-path entry stands for (itself, or its sub-folders)."""
    if is_env_dir(entry):
        return [entry]
    if not entry.is_dir():
        return []
    return sorted(p for p in entry.iterdir() if p.is_dir() and is_env_dir(p))


def check_env_path(env_path: Sequence[Path]) -> list[Problem]:
    """Problems with the entries themselves: missing folders, folders holding no environment."""
    problems: list[Problem] = []
    for entry in env_path:
        if not entry.exists():
            problems.append(Problem(path=str(entry), message="environment path entry does not exist"))
        elif not entry.is_dir():
            problems.append(Problem(path=str(entry), message="environment path entry is not a folder"))
        elif not env_dirs_in(entry):
            problems.append(
                Problem(path=str(entry), message="no environment here (no env.toml in it or its sub-folders)")
            )
    return problems


def env_name_of(folder: Path) -> str:
    """The `name` an env.toml declares, or the folder name when it cannot be read."""
    try:
        with (folder / "env.toml").open("rb") as f:
            name = tomllib.load(f).get("name")
    except (OSError, tomllib.TOMLDecodeError):
        return folder.name
    return name if isinstance(name, str) and name else folder.name


def discover(env_path: Sequence[Path] = (), *, include_environ: bool = True) -> dict[str, Path]:
    """Every known environment by name: bundled, then `ARENA_ENV_PATH`, then `env_path`.

    Entries that do not exist are skipped with a warning (see `check_env_path` to report them).
    """
    found: dict[str, Path] = {}
    entries = [*(env_path_from_environ() if include_environ else []), *env_path]
    for folder in bundled_env_dirs():
        found[env_name_of(folder)] = folder
    for entry in entries:
        dirs = env_dirs_in(entry)
        if not dirs:
            log.warning("env_path_entry_ignored", entry=str(entry), reason="no environment folder")
        for folder in dirs:
            name = env_name_of(folder)
            if name in found and found[name].resolve() != folder.resolve():
                log.info("environment_overridden", env=name, by=str(folder), was=str(found[name]))
            found[name] = folder
    return dict(sorted(found.items()))


class Registry:
    """Loaded environments by name, loading lazily and remembering load failures.

    The daemon and the samplers use one registry; a broken folder never stops the others.
    """

    def __init__(self, env_path: Sequence[Path] = (), *, include_environ: bool = True) -> None:
        self.paths: dict[str, Path] = discover(env_path, include_environ=include_environ)
        self._loaded: dict[str, Environment] = {}
        self.failures: dict[str, list[Problem]] = {}

    def names(self) -> list[str]:
        """Every discovered environment name (loadable or not), sorted."""
        return list(self.paths)

    def get(self, name: str) -> Environment:
        """The loaded environment; KeyError for an unknown name, EnvLoadError for a broken folder."""
        if name in self._loaded:
            return self._loaded[name]
        if name not in self.paths:
            raise KeyError(f"unknown environment {name!r}")
        try:
            env = load_environment(self.paths[name])
        except EnvLoadError as exc:
            self.failures[name] = exc.problems
            raise
        self._loaded[name] = env
        return env

    def load_all(self) -> dict[str, Environment]:
        """Every environment that loads; failures are logged and kept in `failures`."""
        out: dict[str, Environment] = {}
        for name in self.paths:
            try:
                out[name] = self.get(name)
            except EnvLoadError as exc:
                log.warning("environment_broken", env=name, problems=[str(p) for p in exc.problems])
        return out
