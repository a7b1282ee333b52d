"""Problems found while loading an environment folder, and the error that carries all of them.

The loader never stops at the first problem: it collects one `Problem` per fault (file, line or
field, message) so an author fixes a folder in one pass, and the CLI prints them one per line.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from pydantic import BaseModel


class Problem(BaseModel):
    """One fault in an environment folder: where it is and what is wrong."""

    path: str
    line: int | None = None
    field: str | None = None
    message: str

    def __str__(self) -> str:
        where = self.path
        if self.line is not None:
            where += f":{self.line}"
        if self.field:
            where += f" [{self.field}]"
        return f"{where}: {self.message}"


class EnvLoadError(Exception):
    """An environment folder cannot be loaded; `.problems` lists every fault found."""

    def __init__(self, problems: Iterable[Problem]) -> None:
        self.problems: list[Problem] = list(problems)
        super().__init__(self._summary())

    def _summary(self) -> str:
        if not self.problems:
            return "environment cannot be loaded"
        first = str(self.problems[0])
        more = len(self.problems) - 1
        return first if more == 0 else f"{first} (and {more} more problem{'s' if more > 1 else ''})"


class Problems:
    """A collector the loader passes around: `add(...)` problems, then `raise_if_any()`."""

    def __init__(self) -> None:
        self.items: list[Problem] = []

    def add(
        self, path: Path | str, message: str, *, line: int | None = None, field: str | None = None
    ) -> None:
        """Record one problem."""
        self.items.append(Problem(path=str(path), line=line, field=field, message=message))

    def extend(self, problems: Iterable[Problem]) -> None:
        """Record problems found elsewhere (e.g. by a nested loader)."""
        self.items.extend(problems)

    def __bool__(self) -> bool:
        return bool(self.items)

    def raise_if_any(self) -> None:
        """Raise `EnvLoadError` with every recorded problem, if there is one."""
        if self.items:
            raise EnvLoadError(self.items)


def line_of_key(text: str, key: str) -> int | None:
    """The 1-based line where a top-level TOML/JSON-ish `key = ...` is set, if it can be found.

    tomllib gives no positions for values, so field errors are located by a textual search: good
    enough to point an author at the right line, and `None` (field only) when ambiguous.
    """
    pattern = re.compile(rf"^\s*[\"']?{re.escape(key)}[\"']?\s*=")
    for number, line in enumerate(text.splitlines(), start=1):
        if pattern.match(line):
            return number
    return None
