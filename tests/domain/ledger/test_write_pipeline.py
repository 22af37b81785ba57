"""One write = one pipeline of prepared statements in one transaction, whatever goes wrong."""

from __future__ import annotations

from collections.abc import Iterator
from uuid import uuid4

import psycopg
import pytest
from psycopg import errors, pq, sql

from domain.ledger.persistence import pipeline
from domain.ledger.persistence.pipeline import Statement, oid


@pytest.fixture
def conn(database_url: str, pg_schema: str) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(
            sql.SQL("CREATE TABLE {}.t (id uuid PRIMARY KEY, note text)").format(
                sql.Identifier(pg_schema)
            )
        )
        yield conn


def _insert(schema: str) -> Statement:
    text = sql.SQL("INSERT INTO {}.t (id, note) VALUES ($1, $2) RETURNING id").format(
        sql.Identifier(schema)
    )
    return Statement(text.as_bytes(None), (oid("uuid"), oid("text")))


def _rows(conn: psycopg.Connection[tuple[object, ...]], schema: str) -> int:
    query = sql.SQL("SELECT count(*) FROM {}.t").format(sql.Identifier(schema))
    row = conn.execute(query).fetchone()
    assert row is not None
    return int(str(row[0]))


def _idle(conn: psycopg.Connection[tuple[object, ...]]) -> bool:
    return (
        conn.pgconn.pipeline_status == pq.PipelineStatus.OFF
        and conn.info.transaction_status == pq.TransactionStatus.IDLE
    )


def test_a_statement_used_twice_before_it_is_prepared_runs_twice(
    conn: psycopg.Connection[tuple[object, ...]], pg_schema: str
) -> None:
    insert, ids = _insert(pg_schema), [uuid4(), uuid4()]
    results = pipeline.run(conn, [(insert, (ids[0], "a")), (insert, (ids[1], "b"))])
    assert [r.get_value(0, 0) for r in results] == [str(i).encode() for i in ids]
    assert _rows(conn, pg_schema) == 2 and _idle(conn)


def test_a_failing_statement_rolls_back_the_whole_write_and_leaves_the_connection_idle(
    conn: psycopg.Connection[tuple[object, ...]], pg_schema: str
) -> None:
    insert, same = _insert(pg_schema), uuid4()
    pipeline.run(conn, [(insert, (uuid4(), "before"))])
    with pytest.raises(errors.UniqueViolation) as raised:
        pipeline.run(
            conn, [(insert, (uuid4(), "first")), (insert, (same, "x")), (insert, (same, "y"))]
        )
    assert raised.value.diag.constraint_name == "t_pkey"
    assert _rows(conn, pg_schema) == 1 and _idle(conn)
    pipeline.run(conn, [(insert, (uuid4(), "after"))])  # the connection still writes
    assert _rows(conn, pg_schema) == 2


def test_statements_deallocated_by_psycopg_are_prepared_again(
    conn: psycopg.Connection[tuple[object, ...]], pg_schema: str
) -> None:
    insert = _insert(pg_schema)
    pipeline.run(conn, [(insert, (uuid4(), "prepared now"))])
    conn.execute("DEALLOCATE ALL")  # what psycopg sends after a ROLLBACK or DDL it ran
    pipeline.run(conn, [(insert, (uuid4(), "prepared again"))])
    assert _rows(conn, pg_schema) == 2 and _idle(conn)


def test_a_write_on_a_dropped_connection_raises_an_operational_error(
    database_url: str, conn: psycopg.Connection[tuple[object, ...]], pg_schema: str
) -> None:
    with psycopg.connect(database_url, autocommit=True) as other:
        other.execute("SELECT pg_terminate_backend(%s)", (conn.info.backend_pid,))
    with pytest.raises(psycopg.OperationalError):
        pipeline.run(conn, [(_insert(pg_schema), (uuid4(), "lost"))])
    assert conn.pgconn.pipeline_status == pq.PipelineStatus.OFF


def test_parameters_are_dumped_by_the_declared_types() -> None:
    statement = Statement(b"SELECT $1, $2", (oid("int8"), oid("uuid[]")))
    dumped = statement.dump([1, [uuid4()]])
    assert bytes(dumped[0]) == (1).to_bytes(8, "big")  # int8, even for a small value
    with pytest.raises(ValueError, match="2 parameters expected"):
        statement.dump([1])


_DUMP_FAILURE = """
import sys, uuid, psycopg
from psycopg import pq, sql
from domain.ledger.persistence import pipeline
from domain.ledger.persistence.pipeline import Statement, oid
url, schema = sys.argv[1:3]
with psycopg.connect(url, autocommit=True) as conn:
    table = sql.Identifier(schema, "t")
    conn.execute(sql.SQL("CREATE TABLE {} (id uuid PRIMARY KEY, note text)").format(table))
    text = sql.SQL("INSERT INTO {} (id, note) VALUES ($1, $2)").format(table).as_bytes(None)
    insert = Statement(text, (oid("uuid"), oid("text")))
    try:
        pipeline.run(conn, [(insert, (uuid.uuid4(), "a")), (insert, ("not a uuid", "b"))])
    except Exception as e:
        print("raised", type(e).__name__)
    assert conn.pgconn.pipeline_status == pq.PipelineStatus.OFF
    assert conn.info.transaction_status == pq.TransactionStatus.IDLE
    pipeline.run(conn, [(insert, (uuid.uuid4(), "after"))])
    print("rows", conn.execute(sql.SQL("SELECT count(*) FROM {}").format(table)).fetchone()[0])
"""


def test_a_parameter_that_cannot_be_dumped_fails_the_write_without_hanging(
    database_url: str, pg_schema: str
) -> None:
    # A client-side dump error after BEGIN and a first insert were queued, but before the
    # Sync: the write must fail at once and leave the connection idle and usable. Run in a
    # child process, so a hang fails the test instead of blocking the session.
    import subprocess
    import sys

    try:
        done = subprocess.run(
            [sys.executable, "-c", _DUMP_FAILURE, database_url, pg_schema],
            capture_output=True,
            text=True,
            timeout=20,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("pipeline.run hung after a parameter failed to dump")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["raised", "AttributeError", "rows", "1"]
