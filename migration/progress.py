"""Progress of a long run: a bar with rows/s on a terminal, plain log lines otherwise."""

from __future__ import annotations

import sys
import threading
import time
from types import TracebackType
from typing import TextIO

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.text import Text

__all__ = ["RowProgress"]


class _RowsPerSecond(ProgressColumn):
    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        return Text("-- rows/s" if speed is None else f"{speed:,.0f} rows/s")


class RowProgress:
    """Thread-safe row counter shown as a rich bar on a TTY, or as a log line every few seconds.

    Use as a context manager and call `advance(n)` from any thread.
    """

    def __init__(
        self,
        total: int,
        label: str,
        *,
        stream: TextIO | None = None,
        interval: float = 2.0,
        tty: bool | None = None,
    ) -> None:
        self.total, self.label = total, label
        self.stream = stream or sys.stderr
        self.interval = interval
        self.tty = self.stream.isatty() if tty is None else tty
        self.done = 0
        self._lock = threading.Lock()
        self._began = self._last = time.monotonic()
        self._bar: Progress | None = None
        self._task: TaskID | None = None

    def __enter__(self) -> RowProgress:
        self._began = self._last = time.monotonic()
        if self.tty:
            self._bar = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                _RowsPerSecond(),
                TimeElapsedColumn(),
                console=Console(file=self.stream, force_terminal=True),
            )
            self._bar.start()
            self._task = self._bar.add_task(self.label, total=self.total)
        else:
            self._log(f"{self.label}: {self.total} rows")
        return self

    def advance(self, n: int = 1) -> None:
        """Count n more rows done."""
        if self._bar is not None and self._task is not None:
            self._bar.advance(self._task, n)
        with self._lock:
            self.done += n
            now = time.monotonic()
            due = now - self._last >= self.interval
            if due:
                self._last = now
            done = self.done
        if due and self._bar is None:
            self._line(done, now)

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        if self._bar is not None:
            self._bar.stop()
        else:
            self._line(self.done, time.monotonic())

    def _line(self, done: int, now: float) -> None:
        rate = done / max(now - self._began, 1e-9)
        self._log(f"{self.label}: {done}/{self.total} rows ({rate:,.0f} rows/s)")

    def _log(self, message: str) -> None:
        self.stream.write(f"memledger: {message}\n")
        self.stream.flush()
