"""The change feed through the SDK against a live server: JSON pages and the event stream,
each resumable from a cursor."""

from __future__ import annotations

from itertools import islice

from memledger_client import MemLedger
from tests.clients.conftest import Token
from tests.clients.proxy import Proxy


def test_changes_are_paged_in_order_from_a_cursor(alice: MemLedger) -> None:
    start = alice.changes()
    assert start.items == []  # without a cursor: from now
    memory = alice.create_memory("language", "Answer in Python", "preference")
    alice.update_memory(memory.memory_id, 1, content="Answer in Rust")
    alice.forget_memory(memory.memory_id)

    changes = list(alice.iter_changes(start.next_after, limit=1))
    assert [(c.event_type, c.memory_id) for c in changes] == [
        ("memory.created", memory.memory_id),
        ("memory.updated", memory.memory_id),
        ("memory.deleted", memory.memory_id),
    ]
    assert [c.revision for c in changes[:2]] == [1, 2]
    later = list(alice.iter_changes(changes[0].cursor))
    assert [c.event_type for c in later] == ["memory.updated", "memory.deleted"]


def test_the_stream_delivers_changes_and_resumes_after_a_cursor(alice: MemLedger) -> None:
    start = alice.changes().next_after
    first = alice.create_memory("language", "Answer in Python", "preference")
    second = alice.create_memory("diet", "Vegetarian", "fact")
    alice.suppress_memory(first.memory_id)

    stream = alice.stream_changes(start)
    seen = list(islice(stream, 3))
    stream.close()
    assert [(c.event_type, c.memory_id) for c in seen] == [
        ("memory.created", first.memory_id),
        ("memory.created", second.memory_id),
        ("memory.suppressed", first.memory_id),
    ]

    resumed = alice.stream_changes(seen[0].cursor)
    again = list(islice(resumed, 2))
    resumed.close()
    assert again == seen[1:]


def test_a_stream_from_now_sees_only_later_changes(alice: MemLedger) -> None:
    alice.create_memory("language", "Answer in Python", "preference")
    stream = alice.stream_changes()  # the cursor of now is taken when it starts
    later = alice.create_memory("diet", "Vegetarian", "fact")
    (change,) = islice(stream, 1)
    stream.close()
    assert (change.event_type, change.memory_id) == ("memory.created", later.memory_id)


def test_a_dropped_stream_resumes_after_the_last_change_delivered(
    base_url: str, token: Token
) -> None:
    with Proxy(base_url) as proxy, MemLedger(proxy.url, token()) as alice:
        start = alice.changes().next_after
        first = alice.create_memory("language", "Answer in Python", "preference")
        stream = alice.stream_changes(start)
        before = next(stream)
        opened = proxy.accepted
        proxy.cut()  # the stream's connection dies under it
        second = alice.create_memory("diet", "Vegetarian", "fact")
        after = next(stream)
        stream.close()
    assert (before.memory_id, after.memory_id) == (first.memory_id, second.memory_id)
    assert proxy.accepted > opened  # a new connection, resumed from `before.cursor`
