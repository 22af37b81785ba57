"""Progress of a long command on stderr: a rich bar on a terminal, plain lines otherwise.

    with EventProgress("replaying", total, then="checking and swapping in") as progress:
        rebuild(..., progress=progress.advance)

Both show events done of the total, the rate (events/s, from the start: a first batch is a
rate at once) and the time left. On a terminal the bar redraws itself and its elapsed time
moves while a batch runs; without one (a log, CI), a line is written at most every `every`
seconds as events arrive, and always at the end, so a log shows the run move too. Once every
event is counted, `then` says what the command does next (the count no longer moves).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any, Final, TextIO

__all__ = ["EventProgress"]

PLAIN_EVERY: Final = 5.0
"""Seconds between two plain progress lines, at most one per batch."""


class EventProgress:
    """Counts events against a total and shows it (see the module docstring)."""

    def __init__(
        self,
        description: str,
        total: int,
        *,
        then: str | None = None,
        stream: TextIO | None = None,
        tty: bool | None = None,
        every: float = PLAIN_EVERY,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.description = description
        self.then = then
        self.total = total
        self.done = 0
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty() if tty is None else tty
        self.every = every
        self.clock = clock
        self.started = clock()
        self._said_at: float | None = None
        self._said_done = -1
        self._rich: Any = None
        self._task: Any = None

    def __enter__(self) -> EventProgress:
        self.started = self.clock()
        if self.tty:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
            )

            self._rich = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[rate]}"),
                TimeElapsedColumn(),
                TextColumn("{task.fields[left]}"),
                console=Console(file=self.stream, force_terminal=True),
            )
            self._rich.__enter__()
            self._task = self._rich.add_task(self.description, total=self.total, **self._fields())
        return self

    def advance(self, events: int) -> None:
        """`events` more are done."""
        self.done += events
        finished = self.then is not None and self.done >= self.total
        if self._rich is not None:
            if finished:
                self._rich.update(self._task, description=f"{self.description}; {self.then}")
            self._rich.update(self._task, completed=self.done, **self._fields())
            return
        if finished or self._said_at is None or self.clock() - self._said_at >= self.every:
            self._say()
        if finished:
            print(f"memledger: {self.then}", file=self.stream, flush=True)
            self.then = None

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._rich is not None:
            self._rich.__exit__(kind, error, traceback)
        elif kind is None and self._said_done != self.done:
            self._say()  # the last count, unless it was just written

    def line(self) -> str:
        """The plain line: what, how many of how many, the rate and the time left."""
        share = f" ({100 * self.done / self.total:.0f}%)" if self.total else ""
        return (
            f"memledger: {self.description}: {self.done}/{self.total} events{share},"
            f" {self._fields()['rate']}, {self._fields()['left']}"
        )

    def _say(self) -> None:
        self._said_at, self._said_done = self.clock(), self.done
        print(self.line(), file=self.stream, flush=True)

    def _fields(self) -> dict[str, str]:
        elapsed = self.clock() - self.started
        if self.done == 0 or elapsed <= 0:
            return {"rate": "… events/s", "left": "ETA …"}
        rate = self.done / elapsed
        left = max(self.total - self.done, 0) / rate
        return {"rate": f"{rate:,.0f} events/s", "left": f"ETA {_duration(left)}"}


def _duration(seconds: float) -> str:
    minutes, rest = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02}:{rest:02}" if hours else f"{minutes}:{rest:02}"
