"""The batch writers of projections/views/_rows.py store exactly what they are given."""

from __future__ import annotations

from uuid import uuid4

import psycopg
from hypothesis import given, settings
from hypothesis import strategies as st
from psycopg.sql import SQL, Identifier

from projections.views._rows import RowChanges, array_literal

AWKWARD = ["", " ", "NULL", "null", 'say "hi"', "back\\slash", "a,b", "{x}", "tab\there", "中文"]
TYPES = {"id": "uuid", "label": "text", "words": "text[]"}


def test_array_columns_are_copied_and_updated_unchanged(database_url: str, pg_schema: str) -> None:
    table = SQL("{}.rows").format(Identifier(pg_schema))
    ids = [uuid4() for _ in range(4)]
    with psycopg.connect(database_url, autocommit=True) as conn, conn.cursor() as cur:
        cur.execute(
            SQL(
                "CREATE TABLE {} (id uuid, label text, words text[], partition int,"
                " PRIMARY KEY (partition, id))"
            ).format(table)
        )
        first = RowChanges(table, "id", ["label", "words"], TYPES, 3)
        for n, key in enumerate(ids):
            first.insert(key, {"label": f"row {n}", "words": AWKWARD[n:]})
        first.flush(cur)
        second = RowChanges(table, "id", ["label", "words"], TYPES, 3)
        second.update(ids[0], words=list(reversed(AWKWARD)))
        second.update(ids[1], words=[])
        second.update(ids[2], label="renamed")
        second.update(ids[3], words=["only"], label="both")
        second.flush(cur)
        rows = cur.execute(SQL("SELECT id, label, words FROM {}").format(table)).fetchall()
        assert cur.execute(SQL("SELECT DISTINCT partition FROM {}").format(table)).fetchall() == [
            (3,)
        ]
    stored = {key: (label, words) for key, label, words in rows}
    assert stored[ids[0]] == ("row 0", list(reversed(AWKWARD)))
    assert stored[ids[1]] == ("row 1", [])
    assert stored[ids[2]] == ("renamed", AWKWARD[2:])
    assert stored[ids[3]] == ("both", ["only"])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00"))))
def test_an_array_literal_reads_back_as_its_items(database_url: str, items: list[str]) -> None:
    with psycopg.connect(database_url, autocommit=True) as conn:
        row = conn.execute("SELECT %s::text::text[]", (array_literal(items),)).fetchone()
    assert row is not None and row[0] == items
