"""The change feed: the caller's memory and candidate changes (API_CONTRACT.md, `GET /me/changes`).

A JSON page by default; with `Accept: text/event-stream`, the same items as Server-Sent Events
(`id:` the cursor, `event:` the type, `data:` the item), resumed from `Last-Event-ID`, with a
comment heartbeat every MEMLEDGER_FEED_HEARTBEAT seconds. A stream holds one of the user's
stream slots (api/limits.py) while open, and a database connection only for each short look
for new changes (every MEMLEDGER_FEED_POLL seconds while idle); it ends when the client goes
away or the server shuts down (sse-starlette watches uvicorn's exit), and the client resumes
with the last id it saw.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import AsyncIterator
from dataclasses import asdict
from typing import Annotated, Any, Final

import anyio
from fastapi import APIRouter, Header, Query, Request
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.background import BackgroundTask
from starlette.concurrency import run_in_threadpool

from api.deps import CurrentIdentity, MinPosition, ServicesDep
from api.limits import UserLimits
from api.schemas.changes import Change, ChangePage
from api.schemas.text import CURSOR_PATTERN
from api.services import Services
from api.user_route import UserRoute
from service import changes
from service.caller import Identity

__all__ = ["router"]

router = APIRouter(prefix="/me/changes", tags=["changes"], route_class=UserRoute)

_log = logging.getLogger("memledger.api")
STREAM_BATCH: Final = 100
"""Changes read per look while a stream catches up."""


@router.get(
    "",
    response_model=ChangePage,
    responses={
        200: {
            "description": "a page of changes (JSON), or with `Accept: text/event-stream` the"
            " same items as Server-Sent Events",
            "content": {"text/event-stream": {"schema": {"type": "string"}}},
        }
    },
)
def list_changes(
    identity: CurrentIdentity,
    services: ServicesDep,
    request: Request,
    at: MinPosition,
    after: Annotated[
        str | None,
        Query(
            pattern=CURSOR_PATTERN,
            description="a `cursor` (or `next_after`) this feed returned; omitted: from now",
        ),
    ] = None,
    limit: Annotated[
        int, Query(ge=1, le=changes.MAX_LIMIT, description="at most this many changes (JSON)")
    ] = 100,
    last_event_id: Annotated[
        str | None,
        Header(
            alias="Last-Event-ID",
            pattern=CURSOR_PATTERN,
            description="event stream: resume after this event's id (takes precedence over"
            " `after`)",
        ),
    ] = None,
) -> Any:
    """The caller's memory and candidate changes in order: ids, type, revision and time, never
    content (a forget is `memory.deleted`). JSON pages by default; `Accept: text/event-stream`
    streams them."""
    if "text/event-stream" not in request.headers.get("accept", ""):
        page = changes.page(services, identity, after, limit, min_position=at)
        return ChangePage(
            items=[Change.model_validate(asdict(c)) for c in page.items],
            next_after=page.next_after,
        )
    start = last_event_id or after
    if start is None:
        start = changes.now(services, identity)
    else:
        changes.decode_cursor(start)  # InvalidCursor: 422 before the stream starts
    slot = _Slot(services.limits, identity.user_id)  # UserBusy: 429 past the user's streams
    return EventSourceResponse(
        _stream(services, identity, start, slot),
        ping=services.feed_heartbeat,
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        background=BackgroundTask(slot.release),
    )


class _Slot:
    """One of the user's stream slots, taken now, released once (by the stream's end or the
    response's background task, whichever comes first)."""

    def __init__(self, limits: UserLimits, user_id: str) -> None:
        self._held = limits.hold(user_id, "stream")
        self._held.__enter__()
        self._lock = threading.Lock()
        self._open = True

    def release(self) -> None:
        with self._lock:
            if not self._open:
                return
            self._open = False
        self._held.__exit__(None, None, None)


async def _stream(
    services: Services, identity: Identity, cursor: str, slot: _Slot
) -> AsyncIterator[ServerSentEvent]:
    """The changes after `cursor` as events, then each new one as it is projected."""
    try:
        while True:
            found = await run_in_threadpool(
                changes.follow, services, identity, cursor, STREAM_BATCH
            )
            for change in found.items:
                item = Change.model_validate(asdict(change))
                yield ServerSentEvent(
                    data=item.model_dump_json(), event=change.event_type, id=change.cursor
                )
            cursor = found.next_after
            if len(found.items) < STREAM_BATCH:
                await anyio.sleep(services.feed_poll)  # idle: no connection held
    except Exception:  # the database went away: end; the client resumes from its last id
        _log.warning("change feed stream ended by an error", exc_info=True)
    finally:
        slot.release()
