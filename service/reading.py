"""Read-your-writes for a use case: the read models once they show the caller's writes."""

from __future__ import annotations

from domain.errors import InvalidInput
from domain.ledger.positions import InvalidPosition, Legacy, parse_token, partition_of
from projections.reads import Reads
from service.ports import Ports

__all__ = ["fresh_reads", "min_position"]


def fresh_reads(ports: Ports, user_id: str, min_position: int | None, *projections: str) -> Reads:
    """The reads, once `projections` (the ones the use case reads) show the user's own earlier
    writes and `min_position` (X-Min-Position); it waits for no other projection.

    A position the ledger has not reached yet cannot be waited for: it is capped at the head
    of the user's partition; one of another partition (another user's write) changes nothing
    the user reads. Past the wait's bound: LedgerUnavailable (a stale read could show a
    forgotten memory).
    """
    at_least = 0
    if min_position:
        head = ports.ledger.position(user_id)
        if partition_of(min_position) == partition_of(head):
            at_least = min(min_position, head)
    ports.wait_for(user_id, at_least, projections)
    return ports.reads


def min_position(ports: Ports, user_id: str, text: str) -> int:
    """An `X-Min-Position` as a ledger position: a token this service answered, or a decimal
    position from before the ledger was partitioned (the user's last event at or before it).
    InvalidInput for anything else (422)."""
    try:
        position = parse_token(text)
    except InvalidPosition:
        raise InvalidInput("X-Min-Position", "not a position this service answered") from None
    if isinstance(position, Legacy):
        return ports.ledger.legacy_position(user_id, position)
    return position
