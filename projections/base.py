"""What every projection is: tables, and how a batch of ledger events changes them."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, ClassVar

from psycopg import Connection, Cursor
from psycopg.sql import Composed

from projections.envelope import Envelope
from projections.tracking import Tables

__all__ = ["Projection"]


class Projection(ABC):
    """A read model. `apply` runs inside the transaction that also advances its position.

    Implementations must handle every event they may meet: known ones, events whose personal
    fields are REDACTED (their key is gone), and `event=None` (unknown or unreadable).
    Applying a batch must give the same rows as applying its events one by one.
    """

    name: ClassVar[str]
    tables: ClassVar[tuple[str, ...]]
    """The logical names of its tables: by default the one table named like the projection."""
    stores_positions: ClassVar[bool] = False
    """True when its tables have a `position` column holding ledger positions: the upgrade
    of a ledger from before partitions rewrites them (projections/upgrade.py)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "name" in vars(cls) and "tables" not in vars(cls):
            cls.tables = (cls.name,)

    @abstractmethod
    def create(self, t: Tables) -> list[Composed]:
        """Idempotent DDL for this projection's tables under the names in `t`."""

    @abstractmethod
    def apply(self, cur: Cursor[Any], t: Tables, batch: Sequence[Envelope]) -> None:
        """Change the tables for these events (at least one, all of one ledger partition,
        ascending positions, all not yet applied). Every row written carries that partition
        (`batch[0].partition`), and every statement names it (projections/views/_rows.py
        `PARTITION`)."""

    @property
    def partitionable(self) -> bool:
        """True when a rebuild may replay it in several processes at once, each process over
        a share of the ledger's partitions: its rows of a user depend on that user's events
        alone (true of every projection here: a user's events are all in one partition), and
        applying calls nothing that must not cross a fork (a model, say)."""
        return True

    def backfill(self, conn: Connection[Any], t: Tables) -> int:
        """Fill in, one small step, what `apply` could not compute (e.g. vectors while the
        embedder was down); returns how much was done (0: nothing more to do now).

        The worker running the projection calls it when caught up, between batches.
        """
        return 0
