"""The thread that wakes the projection workers after saves ends with its ledger."""

from __future__ import annotations

import threading
from collections.abc import Callable

import psycopg
from psycopg import sql

from domain.ledger.ledger import MemoryLedger
from domain.model.values import Scope


def notifier_threads() -> int:
    return sum(1 for t in threading.enumerate() if t.name == "ledger-notifier" and t.is_alive())


def test_closing_the_ledger_sends_the_last_note_and_ends_its_thread(
    make_ledger: Callable[..., MemoryLedger], database_url: str
) -> None:
    before = notifier_threads()
    ledger = make_ledger()
    channel = ledger.recorder.channel_name  # type: ignore[attr-defined]
    with psycopg.connect(database_url, autocommit=True) as listener:
        listener.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))
        ledger.create_memory(
            "alice", scope=Scope.global_(), memory_key="k", content="a fact", category="fact"
        )
        assert list(listener.notifies(timeout=10.0, stop_after=1))  # woken after the save
        assert notifier_threads() == before + 1

        ledger.close()
        assert notifier_threads() == before  # not left waiting for a save that never comes
        assert list(listener.notifies(timeout=10.0, stop_after=1))  # the last note, at close
