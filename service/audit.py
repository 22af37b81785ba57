"""The auditor's reads: the ledger's security trail, and a user's memories as of a time.

Only a token with the auditor role reads them (`require_auditor`: PolicyDenied `not_auditor`);
what an auditor was shown of a user's memories is itself recorded (`memory.read`).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any, Final
from uuid import UUID

from domain.errors import PolicyDenied
from domain.ledger.access import AccessHit
from projections.views.audit_log import AuditLog
from projections.views.profile import Profile
from replay import ReplayQuery, replay
from service.caller import Identity
from service.ports import Ports

__all__ = ["AUDITOR_ROLE", "as_of", "events", "require_auditor"]

AUDITOR_ROLE: Final = "auditor"


def require_auditor(caller: Identity) -> None:
    """PolicyDenied `not_auditor` unless the caller has the auditor role."""
    if AUDITOR_ROLE not in caller.roles:
        raise PolicyDenied("not_auditor", "only a token with the auditor role reads the audit log")


def events(
    ports: Ports,
    caller: Identity,
    *,
    after: int = 0,
    limit: int = 100,
    user_id: str | None = None,
    memory_id: UUID | None = None,
) -> list[dict[str, Any]]:
    """Ledger events after `after`, ascending, including every event committed before the
    call (the projections are awaited, bounded: LedgerUnavailable rather than a page that
    silently misses events)."""
    require_auditor(caller)
    # The ledger head covers any X-Min-Position that can exist; a larger one cannot be awaited.
    # The trail is audit_log's rows with the profile's changes beside them: both are awaited.
    ports.wait_for(caller.user_id, ports.ledger.position(), [AuditLog.name, Profile.name])
    return ports.reads.audit(after=after, limit=limit, user_id=user_id, memory_id=memory_id)


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
