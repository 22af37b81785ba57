"""Ledger positions: where an event stands in its partition, as one integer and as a token.

The ledger is split into partitions (persistence/partitions.py): each has its own gap-free,
commit-ordered sequence of positions 1, 2, 3, ... A position across the whole ledger names the
partition too, packed into one integer, `local << PARTITION_BITS | partition`:

- within a partition (so among one user's events, which all live in one) it increases
  exactly as the partition's own sequence does, so views, cursors and read-your-writes waits
  compare positions of one user as plain integers;
- across partitions it is an identifier, not an order (commit time orders those).

At the HTTP boundary a position travels as an opaque token (`X-Position`, cursors): `token`
and `parse_token`. A decimal number from a release before partitions (a global notification
id) parses as `Legacy`, which a reader translates against the ledger
(`MemoryLedger.legacy_position`).
"""

from __future__ import annotations

import re
from typing import Final, NamedTuple

__all__ = [
    "MAX_PARTITIONS",
    "PARTITION_BITS",
    "InvalidPosition",
    "Legacy",
    "local_of",
    "pack",
    "parse_token",
    "partition_of",
    "token",
]

PARTITION_BITS: Final = 10
MAX_PARTITIONS: Final = 1 << PARTITION_BITS
"""At most 1024 partitions: a position keeps 53 bits for the partition's own sequence."""
_MASK: Final = MAX_PARTITIONS - 1
_TOKEN: Final = re.compile(r"p([0-9]{1,4})\.([0-9]{1,16})")
_LEGACY: Final = re.compile(r"[0-9]{1,18}")


class InvalidPosition(ValueError):
    """A position token that this ledger never gave out."""


class Legacy(NamedTuple):
    """A global position written before the ledger was partitioned (a notification id)."""

    notification_id: int


def pack(partition: int, local: int) -> int:
    """The position of the `local`-th event of `partition` (0: before its first)."""
    if not 0 <= partition < MAX_PARTITIONS or local < 0:
        raise InvalidPosition(f"no position {local} in partition {partition}")
    return local << PARTITION_BITS | partition


def partition_of(position: int) -> int:
    """The partition a position is in."""
    return position & _MASK


def local_of(position: int) -> int:
    """The position within its partition."""
    return position >> PARTITION_BITS


def token(position: int) -> str:
    """The opaque text form of a position (`X-Position`, cursors)."""
    return f"p{partition_of(position)}.{local_of(position)}"


def parse_token(text: str) -> int | Legacy:
    """A position from its token, or a pre-partitioning decimal position (`Legacy`)."""
    text = text.strip()
    if match := _TOKEN.fullmatch(text):
        return pack(int(match[1]), int(match[2]))
    if _LEGACY.fullmatch(text):
        return Legacy(int(text))
    raise InvalidPosition("not a ledger position")
