"""Auditor replay over HTTP: `memledger replay` and its `--as-of` view, for auditor tokens.

`GET /audit/replay` streams the ledger as JSON lines, exactly the lines the command prints for
the same filters (same names, same meaning); `GET /audit/users/{user_id}/memories?as_of=`
answers a user's memories as they stood at a time. Both read the ledger itself through the
`replay` package, never a projection. Content is shown while its data key exists; forgotten
content is `"redacted": true`. Each answer is itself recorded for audit (`memory.read`, tool
`audit.replay` / `audit.as_of`, under the auditor's user id) with the memories it showed.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from datetime import datetime
from itertools import islice
from typing import Annotated, Any, Final
from uuid import UUID

from fastapi import APIRouter, Path, Query
from fastapi.responses import StreamingResponse
from pydantic import BeforeValidator

from api.deps import CurrentIdentity, ServicesDep
from api.schemas.replay import AsOfView, ReplayRecord
from api.services import Services
from api.user_route import UserRoute
from domain.ledger.access import AccessHit
from replay import ReplayQuery, parse_time, replay
from service import audit
from service.audit import require_auditor

__all__ = ["NDJSON", "router"]

NDJSON: Final = "application/x-ndjson"
_CHUNK: Final = 200
"""Lines per chunk written: one thread hop per chunk, not per line."""
_TIME_HELP: Final = "ISO 8601, e.g. 2025-06-01T12:00:00Z (no offset: UTC)"  # as the command says


def _time(value: object) -> object:
    if not isinstance(value, str):
        return value
    try:
        return parse_time(value)
    except ValueError as error:
        raise ValueError(f"{error}; use {_TIME_HELP}") from None


Time = Annotated[datetime, BeforeValidator(_time)]
"""A time as `memledger replay` reads it (`replay.parse_time`): no offset means UTC."""

router = APIRouter(prefix="/audit", tags=["audit"], route_class=UserRoute)


class NDJSONResponse(StreamingResponse):
    """JSON lines, streamed."""

    media_type = NDJSON


@router.get(
    "/replay",
    response_class=NDJSONResponse,
    responses={
        200: {
            "description": "one JSON object per line (a `ReplayRecord`), in position order",
            "content": {
                NDJSON: {
                    "schema": ReplayRecord.model_json_schema(),
                    "example": json.dumps(
                        ReplayRecord.model_json_schema()["examples"][0], ensure_ascii=False
                    )
                    + "\n",
                }
            },
        }
    },
)
def replay_ledger(
    identity: CurrentIdentity,
    services: ServicesDep,
    user: Annotated[
        str | None, Query(min_length=1, max_length=200, description="only events of this user_id")
    ] = None,
    memory: Annotated[
        UUID | None,
        Query(description="only events of this memory id (and candidates and reads about it)"),
    ] = None,
    after: Annotated[int, Query(ge=0, description="only positions after this one")] = 0,
    until: Annotated[
        int | None, Query(ge=0, description="only positions up to this one (inclusive)")
    ] = None,
    since: Annotated[
        Time | None, Query(description=f"events at or after this time; {_TIME_HELP}")
    ] = None,
    before: Annotated[Time | None, Query(description="events strictly before this time")] = None,
) -> NDJSONResponse:
    """The ledger's events as JSON lines: the lines `memledger replay` prints for the same
    filters. Positions `after < position <= until`, times `since <= occurred_at < before`."""
    require_auditor(identity)
    query = ReplayQuery(user, memory, after, until, since, before)
    records = replay(services.ledger, query)
    first = list(islice(records, _CHUNK))  # a ledger that cannot be read: 503, not a cut stream
    return NDJSONResponse(_lines(services, identity.user_id, first, records))


@router.get("/users/{user_id}/memories", response_model=AsOfView)
def memories_as_of(
    identity: CurrentIdentity,
    services: ServicesDep,
    user_id: Annotated[str, Path(min_length=1, max_length=200)],
    as_of: Annotated[Time, Query(description=f"the time to look at; {_TIME_HELP}")],
    memory: Annotated[UUID | None, Query(description="only this memory")] = None,
) -> dict[str, Any]:
    """The user's memories as they stood at `as_of`, as `memledger replay --as-of` prints them.

    Memories forgotten by then are left out; one live then and forgotten since is
    `redacted: true`, without key or content.
    """
    items = audit.as_of(services, identity, user_id, as_of, memory, _row)
    return {"user_id": user_id, "as_of": as_of.isoformat(), "items": items}


def _lines(
    services: Services, auditor: str, first: list[dict[str, Any]], rest: Iterator[dict[str, Any]]
) -> Iterator[str]:
    """The records as JSON lines, in chunks; what was sent is recorded when the stream ends."""
    shown: dict[str, AccessHit] = {}  # each memory whose events were sent, first seen first
    try:
        chunk: Iterable[dict[str, Any]] = first
        while chunk:
            for record in chunk:
                if record["aggregate"] == "memory":
                    shown[record["aggregate_id"]] = _row(record, shown.get(record["aggregate_id"]))
            yield "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in chunk)
            chunk = list(islice(rest, _CHUNK))
    finally:
        services.record_read(auditor, "audit.replay", list(shown.values()))


def _row(record: dict[str, Any], seen: AccessHit | None = None) -> AccessHit:
    """What an access record keeps of a memory that was shown: id, scope, latest revision."""
    memory_id = record.get("aggregate_id", record.get("memory_id"))
    # None when neither this record nor an earlier one of the stream says (a later event first).
    scope_type: Any = record.get("scope_type") or (seen.scope_type if seen else None)
    return AccessHit(
        UUID(str(memory_id)),
        scope_type,
        record.get("workspace_type") or (seen.workspace_type if seen else None),
        record.get("revision") or (seen.revision if seen else None),
    )
