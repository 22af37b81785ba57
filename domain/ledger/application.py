"""MemoryLedger: the commands of sections 8-9, each one transaction on the PostgreSQL ledger."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, ClassVar, Final, TypeVar
from uuid import UUID

from eventsourcing.application import AggregateNotFoundError, Application
from eventsourcing.persistence import IntegrityError, PersistenceError
from eventsourcing.utils import Environment, get_topic
from psycopg.sql import SQL

from domain.errors import KeyExists, LedgerUnavailable, MemoryForgotten, NotFound
from domain.ledger.keyring import MasterKeyring
from domain.ledger.keystore import DataKeyStore, NewDataKey
from domain.ledger.persistence import reads
from domain.ledger.persistence.factory import LedgerFactory
from domain.ledger.persistence.recorder import LedgerRecorder
from domain.ledger.persistence.tables import KEY_CLAIMS, table
from domain.ledger.sealing import MissingDataKey, SealingMapper
from domain.ledger.views import MemoryView, Outcome
from domain.model.candidate import MemoryCandidate
from domain.model.memory import Memory
from domain.model.text import normalise_content
from domain.model.values import Scope

__all__ = ["UNSET", "LedgerBase"]

T = TypeVar("T")
UNSET: Final[Any] = object()
"""Marks an optional command argument the caller did not give (None means 'clear it')."""

_ATTEMPTS: Final = 8


class _Retry(Exception):
    """A concurrent writer won a race; run the command body again on fresh state."""


class _ClaimTaken(_Retry):
    """The save lost on a key claim: another live memory holds the (user, scope, key)."""


class LedgerBase(Application[UUID]):
    """Infrastructure shared by the command modules: keys, saving, loading and retries."""

    name = "MemLedger"
    env: ClassVar[dict[str, str]] = {
        "PERSISTENCE_MODULE": get_topic(LedgerFactory),
        "APPLICATION_RECORDER_TOPIC": get_topic(LedgerRecorder),
    }

    def __init__(
        self,
        env: Mapping[str, str],
        keyring: MasterKeyring,
        *,
        key_cache_ttl: float = 30.0,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.keyring = keyring
        self._key_cache_ttl = key_cache_ttl
        self.clock = clock or (lambda: datetime.now(UTC))
        super().__init__(env=dict(env))
        self._schema: str = self.factory.datastore.schema or "public"  # type: ignore[attr-defined]
        self._find_claim = reads.render(
            SQL("SELECT memory_id FROM {} WHERE claim = %s").format(table(self._schema, KEY_CLAIMS))
        )

    def construct_env(self, name: str, env: Mapping[str, str] | None = None) -> Environment:
        # Configuration comes only from the settings object, never from os.environ here.
        return Environment(name, {**type(self).env, **(env or {})})

    def construct_mapper(self) -> SealingMapper:
        datastore = self.factory.datastore  # type: ignore[attr-defined]
        self.keys = DataKeyStore(datastore, self.keyring, cache_ttl=self._key_cache_ttl)
        return SealingMapper(self.construct_transcoder(), self.keys)

    # -- keyed hashes ------------------------------------------------------------------------

    def content_hash(self, key_id: UUID, content: str) -> str:
        """Keyed hash of normalised content; uncheckable once the memory's key is shredded."""
        key = self.keys.get(key_id)
        if key is None:  # forgotten since it was loaded: reload, and the command sees it
            raise _Retry(f"the data key of {key_id} is gone")
        return self.keys.keyed_hash(key, "content", normalise_content(content))

    def claim_for(self, user_id: str, scope: Scope, memory_key: str) -> str:
        """Keyed hash of (scope, key) under the user's key: reveals no key in clear."""
        return self.keys.keyed_hash(self.keys.user_key(user_id), "claim", scope.label(), memory_key)

    def fingerprint(
        self, user_id: str, scope: Scope, memory_key: str, content: str, category: str
    ) -> str:
        """Keyed fingerprint of a normalised proposal, for recognising it without its text."""
        return self.keys.keyed_hash(
            self.keys.user_key(user_id),
            "proposal",
            scope.label(),
            memory_key,
            normalise_content(content),
            category,
        )

    # -- loading -----------------------------------------------------------------------------

    def _load(self, cls: type[T], user_id: str, aggregate_id: UUID) -> T:
        try:
            aggregate: object = self.repository.get(aggregate_id)
        except AggregateNotFoundError:
            raise NotFound(f"{cls.__name__} {aggregate_id} not found") from None
        if not isinstance(aggregate, cls) or getattr(aggregate, "user_id", None) != user_id:
            raise NotFound(f"{cls.__name__} {aggregate_id} not found")
        return aggregate

    def _memory(self, user_id: str, memory_id: UUID, *, live: bool = True) -> Memory:
        memory = self._load(Memory, user_id, memory_id)
        if live and memory.is_forgotten:
            raise MemoryForgotten(memory_id)
        return memory

    def _candidate(self, user_id: str, candidate_id: UUID) -> MemoryCandidate:
        return self._load(MemoryCandidate, user_id, candidate_id)

    def _find_by_key(self, user_id: str, scope: Scope, memory_key: str) -> Memory | None:
        claim = self.claim_for(user_id, scope, memory_key)
        row = self._fetch_one(self._find_claim, (claim,))
        if row is None:
            return None
        return self._memory(user_id, row["memory_id"], live=False)

    def _fetch_one(self, statement: bytes, params: Sequence[Any]) -> dict[str, Any] | None:
        """The first row of one read-only statement (autocommit, retried on dropped links)."""
        datastore = self.factory.datastore  # type: ignore[attr-defined]
        return reads.fetch_one(datastore, statement, params)

    def get_memory(self, user_id: str, memory_id: UUID) -> MemoryView:
        """The current state of one of the user's memories (NotFound / MemoryForgotten)."""
        return MemoryView.of(self._memory(user_id, memory_id))

    # -- saving ------------------------------------------------------------------------------

    def _save(
        self, *aggregates: Any, new_keys: Sequence[NewDataKey] = (), **changes: Any
    ) -> int | None:
        """Save aggregates and side-table changes atomically; returns the last position."""
        try:
            position = self._record_changes(aggregates, new_keys, changes)
        except IntegrityError as error:
            self.keys.discard(new_keys)
            constraint = getattr(getattr(error.__cause__, "diag", None), "constraint_name", "")
            if constraint and KEY_CLAIMS in constraint:
                raise _ClaimTaken("key claimed concurrently") from error
            raise _Retry("aggregate changed concurrently") from error
        except PersistenceError as error:
            self.keys.discard(new_keys)
            raise LedgerUnavailable(str(error)) from error
        except MissingDataKey as error:  # shredded by a concurrent forget while sealing
            self.keys.discard(new_keys)
            raise _Retry(str(error)) from error
        except BaseException:
            self.keys.discard(new_keys)
            raise
        self.keys.unstage(new_keys)
        return position

    def _record_changes(
        self, aggregates: Sequence[Any], new_keys: Sequence[NewDataKey], changes: dict[str, Any]
    ) -> int | None:
        """Map the aggregates' pending events and insert them with the changes; the position.

        The library's `save` does the same through a ProcessingEvent, Recording and
        Notification objects and its notify hooks, none of which the ledger uses; this path
        writes the very same stored events (same mapper, topics and format). With an
        aggregate cache or snapshots configured, the library's path runs instead.
        """
        if self.repository.cache is not None or self.snapshots is not None:
            recordings = self.save(*aggregates, new_keys=new_keys, **changes)
            return recordings[-1].notification.id if recordings else None
        to_stored = self.mapper.to_stored_event
        stored = [to_stored(event) for a in aggregates for event in a.collect_events()]
        ids = self.recorder.insert_events(stored, new_keys=new_keys, **changes)
        return ids[-1] if ids else None

    def _retrying(self, body: Callable[[], T]) -> T:
        """Run a command body until it saves without losing a race (bounded)."""
        for _ in range(_ATTEMPTS - 1):
            try:
                return body()
            except _Retry:
                continue
        try:
            return body()
        except _Retry as error:
            raise LedgerUnavailable("too much contention on this memory; retry") from error

    def _existing_outcome(self, existing: Memory, content: str) -> Outcome:
        if existing.has_same_content(content):
            return Outcome("unchanged", MemoryView.of(existing))
        raise KeyExists(existing.id)
