"""Master-key epochs (issue 14): after `keys rotate --retire` and dropping the old master key,
no data key of a forgotten memory found in any raw page can be unwrapped, although its wrapped
copy is still on the pages; while the old key lives, it can."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any
from uuid import UUID

import psycopg
import pytest

from domain.ledger.keyring import MasterKeyring, generate_master_key
from domain.ledger.ledger import MemoryLedger
from domain.model.values import Scope
from tests.api.test_key_rotation import key_id, keys_cli, wait_gone
from tests.projections.test_at_rest import relations

WRAPPED = 12 + 32 + 16  # nonce, AES-256 data key, GCM tag (domain/ledger/keyring.py)
REACH = 256  # bytes after a key id in which its tuple's wrapped key lies


@pytest.fixture
def pages(database_url: str) -> Iterator[Callable[[str], list[bytes]]]:
    with psycopg.connect(database_url, autocommit=True) as conn:
        try:
            conn.execute("CREATE EXTENSION IF NOT EXISTS pageinspect SCHEMA public")
        except psycopg.Error as error:  # not installed with this server
            pytest.skip(f"pageinspect is not available: {error}")

        def read(schema: str) -> list[bytes]:
            conn.execute(f'VACUUM "{schema}".memledger_data_keys')
            found = []
            for name, blocks in relations(conn, [schema]):
                for block in range(blocks):
                    row = conn.execute("SELECT public.get_raw_page(%s, %s)", (name, block))
                    found.append(bytes(row.fetchone()[0]))  # type: ignore[index]
            return found

        yield read


def unwrappable(pages: list[bytes], keyring: MasterKeyring, ids: list[UUID]) -> set[UUID]:
    """The ids whose data key some raw page holds wrapped under a key of `keyring`."""
    opened = set()
    for key_id_ in ids:
        raw = key_id_.bytes
        for page in pages:
            at = page.find(raw)
            while at >= 0 and key_id_ not in opened:
                window = page[at : at + REACH]
                for start in range(len(window) - WRAPPED + 1):
                    blob = window[start : start + WRAPPED]
                    for master_id in keyring.keys:
                        try:
                            keyring.unwrap(master_id, raw, blob)
                        except Exception:
                            continue
                        opened.add(key_id_)
                at = page.find(raw, at + 1)
    return opened


def test_after_retiring_the_old_master_key_no_forgotten_data_key_unwraps(
    make_ledger: Callable[..., MemoryLedger],
    master_key: str,
    env: dict[str, Any],
    database_url: str,
    pg_schema: str,
    pages: Callable[[str], list[bytes]],
) -> None:
    ledger = make_ledger(keys=[master_key])
    made = [
        ledger.create_memory(
            user, scope=Scope.global_(), memory_key=f"k{i}", content=f"fact {i}", category="fact"
        ).memory
        for user in ("alice", "bob")
        for i in range(4)
    ]
    ids = [m.memory_id for m in made if m is not None]
    kept, forgotten = ids[:2], ids[2:4]
    for memory_id in forgotten:
        ledger.forget_memory("alice", memory_id)
    ledger.erase_user("bob")
    forgotten += ids[4:]
    pids = {s.pid for s in ledger.rotation.status().sessions}
    ledger.close()
    wait_gone(database_url, pids)

    old = MasterKeyring.from_base64([master_key])
    assert unwrappable(pages(pg_schema), old, forgotten)  # the threat: dead copies, old key

    new = generate_master_key()
    retired = keys_cli(env, [new, master_key], "rotate", "--retire")
    assert retired.exit_code == 0, retired.output
    assert f"no data key is wrapped under {key_id(master_key)} any more" in retired.output

    after = pages(pg_schema)
    assert unwrappable(after, old, forgotten)  # still on the pages, VACUUM or not
    only_new = MasterKeyring.from_base64([new])  # the old key dropped and destroyed
    assert unwrappable(after, only_new, kept) == set(kept)  # the scan finds live keys
    assert unwrappable(after, only_new, forgotten) == set()


def test_retire_refuses_while_a_process_still_wraps_under_the_old_key(
    make_ledger: Callable[..., MemoryLedger],
    master_key: str,
    env: dict[str, Any],
) -> None:
    new = generate_master_key()
    server = make_ledger(keys=[master_key, new])  # holds the new key, wraps under the old
    server.create_memory(
        "alice", scope=Scope.global_(), memory_key="k", content="fact", category="fact"
    )
    refused = keys_cli(env, [new, master_key], "rotate", "--retire")
    assert refused.exit_code == 5, refused.output
    assert "still wrap new data keys under another master key" in refused.output
    assert f"restart them with {key_id(new)} first" in refused.output
