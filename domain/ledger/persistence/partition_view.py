"""One partition of the ledger as an eventsourcing ApplicationRecorder.

The library's notification log is one gap-free sequence of notification ids; in the
partitioned ledger each partition is one (persistence/partitions.py). `PartitionRecorder`
shows one partition through the library's interface: its events' ids are their positions
within the partition (1, 2, 3, ...), inserts go to that partition, and the library's own
`ApplicationRecorderTestCase` runs against it (tests/domain/ledger/test_partition_recorder.py:
insert/select, contiguous ordered notifications, concurrent writers).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any
from uuid import UUID

from eventsourcing.persistence import (
    ApplicationRecorder,
    Notification,
    StoredEvent,
    Subscription,
)

from domain.ledger.persistence.recorder import LedgerRecorder
from domain.ledger.positions import local_of

__all__ = ["PartitionRecorder"]


class PartitionRecorder(ApplicationRecorder):
    """The events of one partition, numbered by their position within it."""

    def __init__(self, recorder: LedgerRecorder, partition: int) -> None:
        if not 0 <= partition < recorder.partitions:
            raise ValueError(f"the ledger has no partition {partition}")
        self.recorder = recorder
        self.partition = partition

    def insert_events(
        self, stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> Sequence[int] | None:
        """Insert the events into this partition; their positions within it."""
        placed = {e.originator_id: self.partition for e in stored_events}
        positions = self.recorder.insert_events(stored_events, partitions=placed, **kwargs)
        return None if positions is None else [local_of(p) for p in positions]

    def select_events(
        self,
        originator_id: UUID | str,
        *,
        gt: int | None = None,
        lte: int | None = None,
        desc: bool = False,
        limit: int | None = None,
    ) -> Sequence[StoredEvent]:
        """An aggregate's events (the library's own read, by originator id)."""
        events: Sequence[StoredEvent] = self.recorder.select_events(
            originator_id, gt=gt, lte=lte, desc=desc, limit=limit
        )
        return events

    def select_notifications(
        self,
        start: int | None,
        limit: int,
        stop: int | None = None,
        topics: Sequence[str] = (),
        *,
        inclusive_of_start: bool = True,
    ) -> Sequence[Notification]:
        """The partition's events from `start` (by position within it) to `stop`, in order."""
        after = 0 if start is None else (start - 1 if inclusive_of_start else start)
        notes = self.recorder.read_partition(
            self.partition, max(0, after), limit, until=stop, topics=topics
        )
        return [dataclasses.replace(n, id=local_of(n.id)) for n in notes]

    def max_notification_id(self) -> int | None:
        """The partition's last position (None when it is empty)."""
        return self.recorder.heads()[self.partition] or None

    def subscribe(
        self, gt: int | None = None, topics: Sequence[str] = ()
    ) -> Subscription[ApplicationRecorder]:
        """Not offered: the ledger's projection workers follow partitions themselves."""
        raise NotImplementedError("follow a partition with the projection worker")
