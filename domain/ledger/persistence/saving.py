"""A save: aggregates' new events and side-table rows in one transaction, past `Application.save`.

`record(application, aggregates, changes)` maps the pending events with the application's
mapper and hands them, with the side-table rows in `changes` (see `LedgerRecorder`), to the
recorder; it returns the last notification id. `lost_claim(error)` tells whether an
IntegrityError came from the key-claim table (another live memory holds the key).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any
from uuid import UUID

from eventsourcing.application import Application
from eventsourcing.persistence import IntegrityError

from domain.ledger.persistence.tables import KEY_CLAIMS

__all__ = ["lost_claim", "record"]


def record(
    application: Application[UUID], aggregates: Sequence[Any], changes: Mapping[str, Any]
) -> int | None:
    """Map the aggregates' pending events and insert them with the changes; the position.

    The library's `save` does the same through ProcessingEvent, Recording and Notification
    objects and its notify hooks, none of which the ledger uses; this path writes the very same
    stored events (same mapper, topics and format). With an aggregate cache or snapshots
    configured, the library's path runs instead (it keeps them up to date).
    """
    if application.repository.cache is not None or application.snapshots is not None:
        recordings = application.save(*aggregates, **changes)
        return recordings[-1].notification.id if recordings else None
    to_stored = application.mapper.to_stored_event
    stored = [to_stored(event) for a in aggregates for event in a.collect_events()]
    ids = application.recorder.insert_events(stored, **changes)
    return ids[-1] if ids else None


def lost_claim(error: IntegrityError) -> bool:
    """True when the save failed on the key-claim table (psycopg's diagnostics name it)."""
    constraint = getattr(getattr(error.__cause__, "diag", None), "constraint_name", "")
    return bool(constraint) and KEY_CLAIMS in constraint
