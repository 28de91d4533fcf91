"""What a batch shows while it runs, on stderr: one overall progress bar (rich), a line per
notebook as it finishes, the per-cell lines with ``-v``; nothing with ``--quiet``. Where stderr is
not a terminal (a CI log) there is no bar, only the lines.

May import: the standard library and (lazily) ``rich``."""

from __future__ import annotations

import sys
from typing import Any, TextIO

__all__ = ["Display"]

QUIET, NORMAL, VERBOSE = -1, 0, 1


class Display:
    def __init__(self, total: int, verbosity: int = NORMAL, stream: TextIO | None = None) -> None:
        from rich.console import Console

        self.verbosity = verbosity
        self.console = Console(file=stream or sys.stderr, highlight=False, soft_wrap=True)
        self.progress: Any = None
        self.task: Any = None
        self.total = total
        self.running = 0
        self.batches = ""  # where the --batch rounds stand (on the bar only)
        if verbosity > QUIET and self.console.is_terminal:
            self._start_bar()

    def _start_bar(self) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("left"),
            TimeRemainingColumn(),
            console=self.console,
            transient=True,
        )
        self.progress.start()
        self.task = self.progress.add_task(self._description(), total=self.total)

    def _description(self) -> str:
        batches = f" · {self.batches}" if self.batches else ""
        return f"fixing notebooks ({max(0, self.running)} running){batches}"

    def status(self, text: str) -> None:
        """Where the --batch rounds stand, on the bar (a CI log gets only their lines)."""
        self.batches = text
        self._refresh()

    def note(self, text: str) -> None:
        """A line for every run but a quiet one (the provider, a resumed batch, ...)."""
        if self.verbosity > QUIET:
            self.console.print(text, markup=False)

    def started(self) -> None:
        self.running += 1
        self._refresh()

    def retrying(self, line: str) -> None:
        """A running notebook lost its worker and waits for another (it will start again)."""
        self.running -= 1
        self.note(line)
        self._refresh()

    def cell_line(self, path: str, text: str) -> None:
        if self.verbosity >= VERBOSE:
            self.console.print(f"{path}: {text}", markup=False)

    def finished(self, line: str, *, ran: bool = True) -> None:
        """A notebook is done (``ran``: it had a job, so one fewer is running)."""
        self.running -= ran
        if self.verbosity > QUIET:
            self.console.print(line, markup=False)
        if self.progress is not None:
            self.progress.advance(self.task)
        self._refresh()

    def _refresh(self) -> None:
        if self.progress is not None:
            self.progress.update(self.task, description=self._description())

    def close(self) -> None:
        if self.progress is not None:
            self.progress.stop()
            self.progress = None
