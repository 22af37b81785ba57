"""Physical names of projection tables: live ones, or a fresh set built by a rebuild."""

from __future__ import annotations

from dataclasses import dataclass

from psycopg.sql import SQL, Composed, Identifier

from projections.sealed import RowSeal, seal_for

__all__ = ["PREFIX", "Tables"]

PREFIX = "memledger_"


@dataclass(frozen=True, slots=True)
class Tables:
    """Maps a projection's logical table names to schema-qualified identifiers.

    `suffix` is empty for the live tables; a rebuild uses a unique suffix, so its tables (and
    the indexes PostgreSQL names after them) never collide with live ones.
    """

    schema: str
    suffix: str = ""

    def name(self, logical: str) -> str:
        """The bare table name."""
        return f"{PREFIX}{logical}{self.suffix}"

    def __getitem__(self, logical: str) -> Composed:
        return SQL("{}.{}").format(Identifier(self.schema), Identifier(self.name(logical)))

    @property
    def seal(self) -> RowSeal:
        """How this schema's views seal personal fields (`projections.sealed.seal_for`)."""
        return seal_for(self.schema)

    def index(self, logical: str, purpose: str) -> Identifier:
        """An index name; a rebuild renames its indexes to the live names when it swaps."""
        return Identifier(f"{self.name(logical)}__{purpose}")
