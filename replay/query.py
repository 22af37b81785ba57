"""One auditor's request, checked once, answered by `replay(ledger, query)`.

    query = ReplayQuery(user_id="alice", since=parse_time("2026-06-01T00:00:00Z"))
    for record in replay(ledger, query):  # JSON-ready dicts, one per ledger event
        ...
    replay(ledger, ReplayQuery(user_id="alice", as_of=at))  # her memories as they stood at `at`

Front ends (the CLI, HTTP) build a `ReplayQuery` from their parameters, call `check()` to
turn an impossible request into their own error message, and write the records out.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from domain.ledger.ledger import MemoryLedger
from replay.as_of import as_of
from replay.events import replay_events
from replay.reading import utc

__all__ = ["InvalidQuery", "ReplayQuery", "parse_time", "replay"]


class InvalidQuery(ValueError):
    """A query that cannot be answered: `as_of` without `user_id`, or with event filters.

    `missing` names a field `as_of` needs; `conflicts` the fields it cannot be combined with.
    """

    def __init__(self, missing: str | None = None, conflicts: tuple[str, ...] = ()) -> None:
        self.missing = missing
        self.conflicts = conflicts
        reason = (
            f"needs {missing}" if missing else f"cannot be combined with {', '.join(conflicts)}"
        )
        super().__init__(f"as_of {reason}")


@dataclass(frozen=True, slots=True)
class ReplayQuery:
    """Ledger events filtered by user, memory, position and time; or, with `as_of`, the
    user's memories at that time (optionally one memory).

    Positions `after < position <= until`; times `since <= occurred_at < before`; naive times
    are UTC. `after=0` means from the start.
    """

    user_id: str | None = None
    memory_id: UUID | None = None
    after: int = 0
    until: int | None = None
    since: datetime | None = None
    before: datetime | None = None
    as_of: datetime | None = None

    def check(self) -> None:
        """Raise InvalidQuery when the query cannot be answered."""
        if self.as_of is None:
            return
        if self.user_id is None:
            raise InvalidQuery(missing="user_id")
        given = {
            "after": self.after or None,
            "until": self.until,
            "since": self.since,
            "before": self.before,
        }
        conflicts = tuple(name for name, value in given.items() if value is not None)
        if conflicts:
            raise InvalidQuery(conflicts=conflicts)


def replay(ledger: MemoryLedger, query: ReplayQuery) -> Iterator[dict[str, Any]]:
    """The records the query asks for, JSON-ready, in position (or memory) order.

    An as-of view is rebuilt before this returns, so its ReplayError is raised here, before
    any record; events are read lazily, page by page, as the iterator is consumed.
    """
    query.check()
    if query.as_of is not None and query.user_id is not None:
        return iter(as_of(ledger, query.user_id, query.as_of, memory_id=query.memory_id))
    return replay_events(
        ledger,
        user_id=query.user_id,
        memory_id=query.memory_id,
        after=query.after,
        until=query.until,
        since=query.since,
        before=query.before,
    )


def parse_time(text: str) -> datetime:
    """An ISO 8601 time; a time without an offset is UTC. Raises ValueError otherwise."""
    try:
        at = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(f"{text!r} is not a time") from None
    return utc(at)
