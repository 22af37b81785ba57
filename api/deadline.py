"""ASGI middleware: every HTTP request is answered within its deadline, 503 past it.

The request runs with a deadline (domain/context.py) slightly shorter than the bound, so
pools, retries and read-your-writes waits give up in time and the domain answers
LedgerUnavailable itself. Whatever still runs at the bound (a statement stuck in the
database, a request queued behind a full thread pool) is answered 503 with Retry-After here;
its late response is dropped and its task cancelled (a thread still running finishes on its
own, within its own timeouts).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Final

from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from domain import context

__all__ = ["Deadline"]

_log = logging.getLogger("memledger.api")

INNER: Final = 0.85
"""The share of the bound given to the work itself: the rest is left for its own 503."""


class Deadline:
    """Answer each HTTP request within `seconds`: with its response, or with `late()`."""

    def __init__(self, app: ASGIApp, seconds: float, late: Callable[[], Response]) -> None:
        self.app = app
        self.seconds = seconds
        self.late = late

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        state = {"started": False, "answered": False}

        async def send_unless_answered(message: Message) -> None:
            if state["answered"]:
                return  # 503 was sent already: the late response goes nowhere
            if message["type"] == "http.response.start":
                state["started"] = True
            await send(message)

        with context.within(self.seconds * INNER):  # the task's context copies it
            task = asyncio.ensure_future(self.app(scope, receive, send_unless_answered))
        done, _ = await asyncio.wait({task}, timeout=self.seconds)
        if done or state["started"]:
            await task  # finished (or streaming its response): its result or error stands
            return
        state["answered"] = True
        task.add_done_callback(_forget)
        task.cancel()
        _log.warning(
            "request not answered within %.1fs: 503",
            self.seconds,
            extra={"path": scope.get("path"), "method": scope.get("method")},
        )
        await self.late()(scope, receive, send)


def _forget(task: asyncio.Task[None]) -> None:
    # The abandoned request's outcome: nobody awaits it any more.
    if not task.cancelled() and task.exception() is not None:
        _log.info("abandoned request failed", exc_info=task.exception())
