"""The auditor's reads: the ledger's security trail, and a user's memories as of a time.

Only a token with the auditor role reads them (`require_auditor`: PolicyDenied `not_auditor`);
what an auditor was shown of a user's memories is itself recorded (`memory.read`).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any, Final
from uuid import UUID

from domain.errors import InvalidInput, PolicyDenied
from domain.ledger.access import AccessHit
from domain.ledger.positions import Legacy, pack
from projections import cursors
from projections.views.audit_log import AuditLog
from projections.views.profile import Profile
from replay import ReplayQuery, replay
from service.caller import Identity
from service.ports import Ports

__all__ = ["AUDITOR_ROLE", "as_of", "events", "parse_after", "require_auditor"]

AUDITOR_ROLE: Final = "auditor"
_TAG: Final = "a2"  # an audit cursor: where each partition was left


def require_auditor(caller: Identity) -> None:
    """PolicyDenied `not_auditor` unless the caller has the auditor role."""
    if AUDITOR_ROLE not in caller.roles:
        raise PolicyDenied("not_auditor", "only a token with the auditor role reads the audit log")


def events(
    ports: Ports,
    caller: Identity,
    *,
    after: str | None = None,
    limit: int = 100,
    user_id: str | None = None,
    memory_id: UUID | None = None,
) -> tuple[list[dict[str, Any]], str]:
    """Ledger events after the cursor `after` (None: from the start), and the cursor of the
    next page (`after` again when nothing is newer). The page includes every event committed
    before the call (the projections are awaited, bounded: LedgerUnavailable rather than a
    page that silently misses events). One user's events are read from their partition only.
    """
    given = parse_after(after)
    require_auditor(caller)
    marks = _legacy_marks(ports, given) if isinstance(given, Legacy) else given
    partitions = (
        [ports.ledger.partition(user_id)] if user_id is not None else sorted(ports.ledger.heads())
    )
    # The trail is audit_log's rows with the profile's changes beside them: both are awaited.
    ports.wait_for_ledger([AuditLog.name, Profile.name])
    rows, moved = ports.reads.audit(
        marks=marks, partitions=partitions, limit=limit, user_id=user_id, memory_id=memory_id
    )
    return rows, (_cursor(moved) if rows or after is None else after)


def parse_after(after: str | None) -> dict[int, int] | Legacy:
    """Where each partition was left, by a cursor of this feed; a decimal position given out
    before the ledger was partitioned is `Legacy`. InvalidInput `after` for anything else."""
    if after is None:
        return {}
    if after.isdigit() and len(after) <= 18:
        return Legacy(int(after))

    def parse(values: list[Any]) -> dict[int, int]:
        tag, *pairs = values
        if tag != _TAG:
            raise ValueError(after)
        marks = {}
        for partition, local in pairs:
            if not (isinstance(partition, int) and isinstance(local, int)):
                raise ValueError(after)
            pack(partition, local)  # InvalidPosition (a ValueError) for any impossible pair
            marks[partition] = local
        return marks

    try:
        return cursors.decode(after, parse)
    except cursors.InvalidCursor:
        raise InvalidInput("after", "not a cursor this service answered") from None


def _legacy_marks(ports: Ports, legacy: Legacy) -> dict[int, int]:
    """Every partition's last position at or before a pre-partitioning position."""
    if not legacy.notification_id:
        return {}
    recorder = ports.ledger.store.recorder()
    return {
        p: recorder.legacy_position(p, legacy.notification_id) for p in range(recorder.partitions)
    }


def _cursor(marks: dict[int, int]) -> str:
    return cursors.encode(_TAG, *([p, local] for p, local in sorted(marks.items()) if local))


def as_of(
    ports: Ports,
    caller: Identity,
    user_id: str,
    when: datetime,
    memory_id: UUID | None,
    access_row: Callable[[dict[str, Any]], AccessHit],
) -> list[dict[str, Any]]:
    """The user's memories as they stood at `when` (one forgotten since: redacted); what was
    shown is recorded for audit, each item as `access_row` gives its id, scope and revision."""
    require_auditor(caller)
    items = list(replay(ports.ledger, ReplayQuery(user_id, memory_id, as_of=when)))
    ports.record_read(caller.user_id, "audit.as_of", [access_row(item) for item in items])
    return items
