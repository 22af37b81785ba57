"""Which constraint a save violated: a key claim lost to another memory, or a stale key.

`lost_claim` and `stale_key` classify the IntegrityError a save raises (LedgerRecorder's
`insert_events`), by the constraint psycopg's diagnostics name through the `__cause__` the
library chains to it.
"""

from __future__ import annotations

import re

from eventsourcing.persistence import IntegrityError

from domain.ledger.persistence.tables import KEY_CLAIMS, STALE_KEY_CONSTRAINTS

__all__ = ["lost_claim", "stale_key"]

_CONSTRAINT_IN_MESSAGE = re.compile(r'constraint "([^"]+)"')
_SHARD_SUFFIX = re.compile(r"_\d+$")


def lost_claim(error: IntegrityError) -> bool:
    """True when the save lost a key claim to another memory (psycopg's diagnostics name the
    claim table's own unique constraints)."""
    constraint = _constraint(error)
    return constraint.startswith(KEY_CLAIMS) and constraint not in STALE_KEY_CONSTRAINTS


def stale_key(error: IntegrityError) -> bool:
    """True when the save hashed under a key that is no longer the live one (destroyed, or
    destroyed and made again): the command must run again with the key read afresh."""
    return _constraint(error) in STALE_KEY_CONSTRAINTS


def _constraint(error: IntegrityError) -> str:
    """The name of the constraint a write violated.

    On Citus the error comes from the worker holding the shard: the coordinator passes on its
    message but not the constraint's name, and that name is the shard's (the table's with
    `_<shard id>` appended): so it is read from the message, and the suffix dropped (issue 27;
    met on the loopback cluster: tests/domain/ledger/test_saving.py pins the parsing)."""
    diag = getattr(error.__cause__, "diag", None)
    name = getattr(diag, "constraint_name", "") or ""
    if not name:
        found = _CONSTRAINT_IN_MESSAGE.search(getattr(diag, "message_primary", "") or "")
        name = _SHARD_SUFFIX.sub("", found.group(1)) if found else ""
    return name
