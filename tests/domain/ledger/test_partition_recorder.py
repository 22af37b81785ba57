"""One ledger partition passes the eventsourcing library's own ApplicationRecorderTestCase:
insert and select, contiguous notification ids in commit order, concurrent writers (here, its
ids are the positions within the partition). A second partition written meanwhile never shows
in it, and its own sequence starts at 1 too."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import ClassVar

import pytest
from eventsourcing.persistence import StoredEvent
from eventsourcing.tests.persistence import ApplicationRecorderTestCase
from eventsourcing.utils import Environment

from api.bootstrap import postgres_env
from api.settings import Settings
from domain.ledger.ledger import MemoryLedger
from domain.ledger.persistence.factory import LedgerFactory
from domain.ledger.persistence.partition_view import PartitionRecorder
from domain.ledger.persistence.recorder import LedgerRecorder


class _Schema:
    env: ClassVar[dict[str, str]] = {}


@pytest.fixture(autouse=True)
def _ledger_schema(database_url: str, pg_schema: str) -> Iterator[None]:
    settings = Settings(database_url=database_url, db_schema=pg_schema)
    _Schema.env = {**postgres_env(settings, database_url), **MemoryLedger.env}
    yield


def _recorder() -> LedgerRecorder:
    factory = LedgerFactory(Environment("MemLedger", _Schema.env))
    recorder = factory.application_recorder()
    assert isinstance(recorder, LedgerRecorder)
    return recorder


class TestOnePartition(ApplicationRecorderTestCase[PartitionRecorder]):
    def create_recorder(self) -> PartitionRecorder:
        recorder = _recorder()
        assert recorder.partitions > 1
        return PartitionRecorder(recorder, recorder.partitions - 1)


def test_partitions_number_their_events_apart() -> None:
    recorder = _recorder()
    first, second = PartitionRecorder(recorder, 0), PartitionRecorder(recorder, 1)

    def event(version: int, originator: uuid.UUID) -> StoredEvent:
        return StoredEvent(originator, version, "topic", b"state")

    a, b = uuid.uuid4(), uuid.uuid4()
    assert first.insert_events([event(1, a), event(2, a)]) == [1, 2]
    assert second.insert_events([event(1, b)]) == [1]
    assert first.insert_events([event(3, a)]) == [3]
    assert [n.id for n in first.select_notifications(None, 10)] == [1, 2, 3]
    assert [n.originator_id for n in second.select_notifications(None, 10)] == [b]
    assert first.max_notification_id() == 3 and second.max_notification_id() == 1
    with pytest.raises(ValueError):
        PartitionRecorder(recorder, recorder.partitions)
