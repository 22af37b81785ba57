"""Ledger fixtures on a real PostgreSQL schema of the test's own."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta

import pytest

from api.bootstrap import postgres_env
from api.settings import Settings
from domain.ledger.keyring import MasterKeyring, generate_master_key
from domain.ledger.ledger import MemoryLedger

pytestmark = pytest.mark.integration


class Clock:
    """A settable clock, so expiry rules are tested without sleeping."""

    def __init__(self) -> None:
        self.now = datetime.now(UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)


@pytest.fixture
def master_key() -> str:
    return generate_master_key()


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def make_ledger(
    database_url: str, pg_schema: str, master_key: str, clock: Clock
) -> Iterator[Callable[..., MemoryLedger]]:
    """Build ledgers on this test's schema (several may share it, like several processes)."""
    made: list[MemoryLedger] = []

    def make(
        keys: list[str] | None = None,
        schema: str | None = None,
        pool_size: int = 25,
        **options: object,
    ) -> MemoryLedger:
        settings = Settings(
            database_url=database_url,
            db_schema=schema or pg_schema,
            pool_size=pool_size,
            max_overflow=10,
        )
        ledger = MemoryLedger(
            postgres_env(settings, database_url),
            MasterKeyring.from_base64(keys or [master_key]),
            clock=clock,
            **options,  # type: ignore[arg-type]
        )
        made.append(ledger)
        return ledger

    yield make
    for ledger in made:
        ledger.close()


@pytest.fixture
def ledger(make_ledger: Callable[..., MemoryLedger]) -> MemoryLedger:
    return make_ledger()
