"""Leases on ledger partitions: the worker processes of one name share the partitions.

Every process running a worker of a given name (`projection-worker`, `embeddings-worker`: one
of each per `projections run` and per `serve` with its in-process workers) is a *member* of
that worker's group: it holds a shared advisory lock, the group's member lock, on its
listener connection. A member's fair share of the P partitions is ceil(P / members); it holds
each partition it applies with a session-level `pg_try_advisory_lock` on the same connection,
gives back those above its share (so a member joining gets its share after one turn of the
others), and tries to take free ones on every turn of its loop.

Advisory locks live as long as their session: a member killed (kill -9, a lost host) closes
its socket, PostgreSQL ends the session and drops its locks at once, so the others count one
member fewer and take its partitions on their next turn (about a second) — no heartbeat, no
expiry to wait for. Who holds what is read from `pg_locks`, which every role may read.

A lease only says who *should* apply a partition. Exactly once does not depend on it: each
batch locks the projection's tracking row (projections/applying.py), so two members applying
the same partition during a handover (a member whose listener session was lost while its
pool connection still applies) wait for each other and skip what the other committed.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from psycopg import Connection
from psycopg.sql import SQL

from projections.tracking import lock_key

__all__ = ["Holder", "Leases", "holders", "share", "unheld"]

_HELD = (
    " FROM pg_locks l{}"
    " WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1"
    " AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())"
)
_LOCKS = SQL("SELECT l.classid::bigint, l.objid::bigint, l.pid, l.mode, NULL" + _HELD.format(""))
"""Every advisory lock held in this database: a bigint key shows as its high half in classid
and its low half in objid (objsubid 1)."""
_NAMED = SQL(
    "SELECT l.classid::bigint, l.objid::bigint, l.pid, l.mode, a.application_name"
    + _HELD.format(" LEFT JOIN pg_stat_activity a ON a.pid = l.pid")
)
"""The same with each session's application name (for status only: pg_stat_activity costs
more to read)."""


def share(partitions: int, members: int) -> int:
    """A member's fair share: every partition is someone's share when each takes it."""
    return -(-partitions // max(1, members))


def _halves(key: int) -> tuple[int, int]:
    """How `pg_locks` shows a bigint advisory lock key: (classid, objid), both unsigned."""
    unsigned = key & 0xFFFF_FFFF_FFFF_FFFF
    return unsigned >> 32, unsigned & 0xFFFF_FFFF


@dataclass(frozen=True, slots=True)
class Holder:
    """A member of a worker group: its backend pid, its listener's application name (which
    names the process, see ProjectionWorker) and the partitions it holds."""

    pid: int
    application: str | None
    partitions: tuple[int, ...]


class _Keys:
    """The lock keys of one worker group in one schema."""

    def __init__(self, schema: str, worker: str, partitions: int) -> None:
        self.member = lock_key(schema, f"{worker}/members")
        self.partition = [lock_key(schema, f"{worker}/partition/{p}") for p in range(partitions)]
        self._member_halves = _halves(self.member)
        self._partition_of = {_halves(key): p for p, key in enumerate(self.partition)}

    def read(
        self, conn: Connection[Any], *, named: bool = False
    ) -> tuple[dict[int, str | None], dict[int, int]]:
        """The members ({pid: application name if `named`}) and the partitions held
        ({partition: pid})."""
        members: dict[int, str | None] = {}
        held: dict[int, int] = {}
        for classid, objid, pid, mode, application in conn.execute(
            _NAMED if named else _LOCKS
        ).fetchall():
            if (classid, objid) == self._member_halves and mode == "ShareLock":
                members[pid] = application
            elif (partition := self._partition_of.get((classid, objid))) is not None:
                held[partition] = pid
        return members, held


class Leases:
    """One member's leases, held on `conn` (the worker's listener, autocommit): call
    `refresh` on every turn of the loop; the partitions it returns are this member's to apply.

    Bound to one session: when the connection is closed (a clean stop) or lost, so are the
    locks; make a new Leases with the new connection. `interval`: seconds between two reads
    of `pg_locks` (a turn of a worker under write load is short, one per commit notified;
    reading every lock of the server that often would cost more than it tells); between them
    `refresh` answers what it holds.
    """

    def __init__(
        self,
        conn: Connection[Any],
        schema: str,
        worker: str,
        partitions: int,
        *,
        interval: float = 0.0,
    ) -> None:
        self.conn = conn
        self.interval = interval
        self._next = 0.0
        self.partitions = partitions
        self._keys = _Keys(schema, worker, partitions)
        self.owned: set[int] = set()
        self.members = 0
        self._pid = conn.info.backend_pid
        self._joined = False

    def _order(self, partition: int) -> int:
        # Members start their search at different partitions (by backend pid): two members
        # taking free partitions at once mostly try different ones first.
        return (partition - self._pid) % self.partitions

    def refresh(self) -> frozenset[int]:
        """Join the group (first call), give back the partitions above this member's share,
        take free ones up to it; returns the partitions held now."""
        now = time.monotonic()
        if now < self._next or not self.partitions:
            return frozenset(self.owned)
        self._next = now + self.interval
        conn = self.conn
        if not self._joined:
            # Shared: every member holds it at once; nobody takes it exclusively.
            conn.execute(SQL("SELECT pg_advisory_lock_shared(%s)"), (self._keys.member,))
            self._joined = True
        members, held = self._keys.read(conn)
        self.members = max(1, len(members))
        fair = share(self.partitions, self.members)
        for partition in sorted(self.owned, key=self._order)[fair:]:
            conn.execute(SQL("SELECT pg_advisory_unlock(%s)"), (self._keys.partition[partition],))
            self.owned.discard(partition)
        free = [p for p in range(self.partitions) if p not in held and p not in self.owned]
        for partition in sorted(free, key=self._order):
            if len(self.owned) >= fair:
                break
            row = conn.execute(
                SQL("SELECT pg_try_advisory_lock(%s)"), (self._keys.partition[partition],)
            ).fetchone()
            if row and row[0]:
                self.owned.add(partition)
        return frozenset(self.owned)


def holders(conn: Connection[Any], schema: str, worker: str, partitions: int) -> list[Holder]:
    """The members of the worker group and what each holds, by pid (for status: nothing is
    locked or changed)."""
    members, held = _Keys(schema, worker, partitions).read(conn, named=True)
    by_pid: dict[int, list[int]] = {pid: [] for pid in members}
    for partition, pid in held.items():
        by_pid.setdefault(pid, []).append(partition)
    return [
        Holder(pid, members.get(pid), tuple(sorted(parts))) for pid, parts in sorted(by_pid.items())
    ]


def unheld(partitions: int, holding: Iterable[Holder]) -> list[int]:
    """The partitions nobody holds (none while the group is complete)."""
    taken = {p for h in holding for p in h.partitions}
    return [p for p in range(partitions) if p not in taken]
