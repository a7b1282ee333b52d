"""A rich progress bar for the current phase of `arena run` on a terminal."""

from __future__ import annotations

from types import TracebackType

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn


class TerminalProgress:
    """One bar per phase; the daemon calls `start`, `update`, `note` and `finish`."""

    def __init__(self, console: Console | None = None) -> None:
        self.progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.fields[note]}"),
            console=console or Console(),
            transient=True,
        )
        self._task: TaskID | None = None

    def __enter__(self) -> TerminalProgress:
        self.progress.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.progress.stop()

    def start(self, round_no: int, phase: str) -> None:
        """A new bar for `phase` of `round_no`."""
        self.finish()
        self._task = self.progress.add_task(f"round {round_no} {phase}", total=None, note="")

    def update(self, done: int, total: int, note: str = "") -> None:
        """Move the current bar."""
        if self._task is not None:
            self.progress.update(self._task, completed=done, total=total or None, note=note)

    def note(self, text: str) -> None:
        """Show a short state (e.g. paused) next to the bar."""
        if self._task is not None:
            self.progress.update(self._task, note=text)

    def finish(self) -> None:
        """Remove the current bar."""
        if self._task is not None:
            self.progress.remove_task(self._task)
            self._task = None
