"""Master key rotation that running processes can follow, and where a rotation stands.

    rotation = ledger.rotation                # KeyRotation(connections, ledger.keys, keyring)
    status = rotation.status()                # data keys per master key, connected sessions
    done = rotation.rotate(batch_size=1000)   # RotationRefused: a process could not follow
    retired = rotation.retire()               # older master keys that may now be destroyed

Every ledger process names its database sessions after the master keys it holds
(persistence/sessions.py). Re-wrapping a data key under the new master key makes it unreadable
to a process without that key (its commands answer 503, MasterKeyMissing), so `rotate` refuses,
re-wrapping nothing, while any connected ledger session of the schema does not hold the new
active key, or while data keys are wrapped under a master key this process does not hold (it
could not re-wrap them). It checks again before each batch: a process started meanwhile without
the key stops it (`RotationRefused.rewrapped` says how many were re-wrapped by then).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from domain.errors import DomainError
from domain.ledger.keyring import MasterKeyring
from domain.ledger.keystore import DataKeyStore
from domain.ledger.persistence.key_table import KeyTable
from domain.ledger.persistence.reads import Connections
from domain.ledger.persistence.sessions import Session, connected_sessions

__all__ = ["KeyRotation", "KeyStatus", "RotationRefused"]

_PROCEDURE = 'docs/operations.md, "Master key rotation"'


class RotationRefused(DomainError):
    """The rotation would leave a running process unable to read (nothing more is re-wrapped);
    `sessions` are the sessions that lack the new key, `rewrapped` the keys re-wrapped before."""

    def __init__(self, message: str, sessions: list[Session], rewrapped: int = 0) -> None:
        super().__init__(message)
        self.sessions = sessions
        self.rewrapped = rewrapped


@dataclass(frozen=True)
class KeyStatus:
    """Where a rotation stands: data keys per master key id, the ids this process holds (the
    active one first), and the connected ledger sessions of the schema (this one's too)."""

    active_id: str
    held_ids: list[str]
    wrapped: dict[str, int]
    sessions: list[Session]

    @property
    def wrapping_elsewhere(self) -> list[Session]:
        """Sessions whose process wraps new data keys under another master key (its first)."""
        return [s for s in self.sessions if s.key_ids[:1] != (self.active_id[:8],)]

    @property
    def retired_in_use(self) -> dict[str, int]:
        """Master keys other than the active one that still wrap data keys: not to be dropped."""
        return {key_id: n for key_id, n in self.wrapped.items() if key_id != self.active_id}


class KeyRotation:
    """Checks and runs a rotation to this process's active master key (see the module doc)."""

    def __init__(
        self, connections: Connections, keys: DataKeyStore, keyring: MasterKeyring
    ) -> None:
        self._connections = connections
        self._schema = connections.schema
        self._table = KeyTable(connections)
        self._keys = keys
        self._keyring = keyring

    def status(self) -> KeyStatus:
        """Data keys per master key and the connected sessions, read now."""
        return KeyStatus(
            active_id=self._keyring.active_id,
            held_ids=self._keyring.held_ids,
            wrapped=dict(sorted(self._table.count_by_master_key().items())),
            sessions=connected_sessions(self._connections, self._schema),
        )

    def unable_to_follow(self) -> list[Session]:
        """Connected ledger sessions of the schema that do not hold the active master key."""
        active = self._keyring.active_id
        return [
            s for s in connected_sessions(self._connections, self._schema) if not s.holds(active)
        ]

    def rotate(self, batch_size: int = 1000, progress: Callable[[int], None] | None = None) -> int:
        """Re-wrap every data key under the active master key; how many. RotationRefused when
        a process could not follow, or a data key's master key is not held here."""
        unknown = {
            key_id: n
            for key_id, n in self._table.count_by_master_key().items()
            if key_id not in self._keyring.keys
        }
        if unknown:
            listed = ", ".join(f"{n} under {key_id}" for key_id, n in unknown.items())
            raise RotationRefused(
                f"keys rotate refused: data keys are wrapped under master keys this process"
                f" does not hold ({listed}); add them after the new key and run it again",
                [],
            )
        done = 0

        def counted(rows: int) -> None:
            nonlocal done
            done += rows
            if progress is not None:
                progress(rows)

        def check() -> None:
            lacking = self.unable_to_follow()
            if lacking:
                raise RotationRefused(self._refusal(lacking, done), lacking, done)

        return self._keys.rotate(batch_size, counted, before_batch=check)

    def retire(self) -> list[str]:
        """The master keys this process holds besides the active one, once they may be destroyed:
        no data key is wrapped under them and every connected process wraps new ones under the
        active key. RotationRefused (saying what is left) otherwise.

        Destroying them then makes every wrapped copy they made unreadable: in dead tuples of
        the key table, in WAL and in backups (the bound of a forget at rest: docs/ledger.md).
        """
        status = self.status()
        left = []
        if status.retired_in_use:
            listed = ", ".join(f"{n} under {key_id}" for key_id, n in status.retired_in_use.items())
            left.append(f"data keys are still wrapped under older master keys ({listed})")
        if status.wrapping_elsewhere:
            sessions = "; ".join(s.describe() for s in status.wrapping_elsewhere)
            left.append(
                f"connected processes still wrap new data keys under another master key"
                f" ({sessions}): restart them with {status.active_id} first, then rotate again"
            )
        if left:
            raise RotationRefused(
                "keys rotate --retire refused: " + "; ".join(left), status.wrapping_elsewhere
            )
        return [key_id for key_id in status.held_ids if key_id != status.active_id]

    def _refusal(self, lacking: list[Session], done: int) -> str:
        active = self._keyring.active_id
        stopped = f" (stopped after re-wrapping {done} data keys)" if done else ""
        sessions = "; ".join(session.describe() for session in lacking)
        return (
            f"keys rotate refused{stopped}: {len(lacking)} connected memledger sessions do not"
            f" hold the new master key {active}: {sessions}. Add it after the current key in"
            f" their MEMLEDGER_MASTER_KEY and restart them first ({_PROCEDURE})"
        )
