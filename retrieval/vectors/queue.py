"""Query embeddings queued fairly across users, on a fixed number of threads.

A query embedding is the one CPU-heavy step of a search (tens to hundreds of milliseconds of
model time); the bundled models run one call at a time anyway. So every query embedding of
the process runs here, on `workers` threads (MEMLEDGER_QUERY_EMBED_CONCURRENCY), and the
queue in front of them is fair: the next job is the one of the user who has used the least
embedding time lately (an exponentially decayed sum, `half_life` seconds), first come first
served among equals. A user sending many expensive queries therefore waits behind their own
work, while another user's query runs next, after at most the job already running.

That last wait is what a flood still costs others, so a user's share is bounded too: while
the queue is busy (a job running or waiting), a user whose decayed embedding time is past
`share` seconds gets no embedding (`OverShare`: their search answers lexically), and the
threads stay free for the others. On an idle queue anyone's query embeds.

The caller waits for the future within a budget: past it the search goes on lexically, and
the job is dropped if it has not started; once started it cannot be interrupted (the model is
native code), so it finishes and its vector still lands in the query cache for a repeat.
"""

from __future__ import annotations

import itertools
import math
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Final, Generic, TypeVar

__all__ = ["DEFAULT_HALF_LIFE", "DEFAULT_SHARE", "FairQueue", "OverShare"]

T = TypeVar("T")

DEFAULT_HALF_LIFE: Final = 10.0
"""Seconds after which a user's past embedding time counts half in the queue's order."""

DEFAULT_SHARE: Final = 0.5
"""Seconds of (decayed) embedding time past which a user waits for an idle queue."""


class OverShare(Exception):
    """The user used their share of a busy queue: this query is not embedded."""


@dataclass(order=True)
class _Job(Generic[T]):
    seq: int
    user: str = field(compare=False)
    work: Callable[[], T] = field(compare=False)
    future: Future[T] = field(compare=False)


class FairQueue:
    """Runs submitted calls on `workers` daemon threads (started on first use), fairly by user,
    until `close`."""

    def __init__(
        self,
        workers: int = 1,
        *,
        half_life: float = DEFAULT_HALF_LIFE,
        share: float | None = DEFAULT_SHARE,
        clock: Callable[[], float] = time.monotonic,
        name: str = "memledger-query-embedding",
    ) -> None:
        if workers < 1:
            raise ValueError("a fair queue needs at least one worker")
        self.workers = workers
        self.half_life = half_life
        self.share = share
        self._running = 0
        self.clock = clock
        self.name = name
        self._pending: list[_Job[object]] = []
        self._usage: dict[str, tuple[float, float]] = {}  # user -> (seconds, as of when)
        self._seq = itertools.count()
        self._ready = threading.Condition()
        self._threads: list[threading.Thread] = []
        self._closed = False

    def submit(self, user: str, work: Callable[[], T]) -> Future[T]:
        """Queue `work` for `user`; cancel the future to drop it while it is still queued.

        OverShare when the queue is busy and the user is past their share (see the module).
        """
        future: Future[T] = Future()
        with self._ready:
            if self._closed:
                raise RuntimeError(f"{self.name}: the queue is closed")
            busy = self._running or self._pending
            if self.share is not None and busy and self._used(user, self.clock()) > self.share:
                raise OverShare(user)
            self._start_workers()
            self._pending.append(_Job(next(self._seq), user, work, future))  # type: ignore[arg-type]
            self._ready.notify()
        return future

    def close(self, timeout: float = 5.0) -> None:
        """Take no more jobs; the threads end once the jobs already queued are done (waited
        for up to `timeout` seconds: a running model call cannot be interrupted)."""
        with self._ready:
            self._closed = True
            self._ready.notify_all()
        for thread in self._threads:
            thread.join(timeout)

    def pending(self) -> int:
        """Jobs waiting (cancelled ones included until a worker passes them)."""
        with self._ready:
            return len(self._pending)

    def _start_workers(self) -> None:
        while len(self._threads) < self.workers:
            thread = threading.Thread(
                target=self._run, name=f"{self.name}-{len(self._threads)}", daemon=True
            )
            self._threads.append(thread)
            thread.start()

    def _used(self, user: str, now: float) -> float:
        seconds, when = self._usage.get(user, (0.0, now))
        return seconds * math.pow(0.5, (now - when) / self.half_life)

    def _next(self) -> _Job[object] | None:
        """The job of the user with the least recent embedding time (then the oldest); None
        once the queue is closed and empty."""
        with self._ready:
            while not self._pending:
                if self._closed:
                    return None
                self._ready.wait()
            now = self.clock()
            job = min(self._pending, key=lambda j: (self._used(j.user, now), j.seq))
            self._pending.remove(job)
            return job

    def _run(self) -> None:
        while (job := self._next()) is not None:
            if not job.future.set_running_or_notify_cancel():
                continue  # the caller gave up while it waited: never run
            started = self.clock()
            with self._ready:
                self._running += 1
            result: object = None
            failure: BaseException | None = None
            try:
                result = job.work()
            except BaseException as error:  # handed to the caller, whatever it is
                failure = error
            now = self.clock()
            with self._ready:  # before the caller hears: its next job must not find us busy
                self._running -= 1
                self._usage[job.user] = (self._used(job.user, now) + now - started, now)
                self._forget_idle(now)
            if failure is not None:
                job.future.set_exception(failure)
            else:
                job.future.set_result(result)

    def _forget_idle(self, now: float) -> None:
        """Drop users whose usage decayed to nothing (the map stays small)."""
        if len(self._usage) > 1024:
            for user in [u for u in self._usage if self._used(u, now) < 1e-3]:
                del self._usage[user]
