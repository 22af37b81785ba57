"""MemoryLedger: the application service every entry point (API, CLI, scripts) talks to.

    ledger = MemoryLedger(postgres_env(settings, url), MasterKeyring.from_base64(keys))
    outcome = ledger.create_memory("alice", scope=Scope.global_(), memory_key="style",
                                   content="I prefer examples first", category="preference")
    ledger.forget_memory("alice", outcome.memory.memory_id)

Commands return an `Outcome` (domain/ledger/results.py) whose `position` a caller waits for
before reading projections; they raise the errors of domain/errors.py. Each concern is a
command object of its own (memories, candidates, forgetting, settings, access log), built
here over one `AggregateStore`; the ledger's methods are theirs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import ClassVar
from uuid import UUID

from eventsourcing.application import Application
from eventsourcing.utils import Environment, get_topic

from domain.ledger.access import AccessLog
from domain.ledger.candidates import CandidateCommands
from domain.ledger.forgetting import Forgetting, shredding_topics
from domain.ledger.hashes import KeyedHashes
from domain.ledger.keyring import MasterKeyring
from domain.ledger.keystore import DataKeyStore
from domain.ledger.memories import MemoryCommands
from domain.ledger.persistence.factory import LedgerFactory
from domain.ledger.persistence.lookups import Lookups
from domain.ledger.persistence.reads import Connections
from domain.ledger.persistence.recorder import LedgerRecorder
from domain.ledger.persistence.revocations import RevocationListener
from domain.ledger.persistence.sessions import SESSION_NAME_ENV, session_name
from domain.ledger.rotation import KeyRotation
from domain.ledger.sealing import SealingMapper
from domain.ledger.settings import SettingsCommands
from domain.ledger.store import AggregateStore

__all__ = ["MemoryLedger"]


class MemoryLedger(Application[UUID]):
    """Memories, candidates and settings of every user, on one PostgreSQL ledger.

    Every command validates, loads, calls the aggregate and saves in one transaction; races
    with concurrent writers are retried on fresh state, so a stale `expected_revision` always
    ends in RevisionConflict and never in a lost update.
    """

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
        self._revocations: RevocationListener | None = None
        self.clock = clock or (lambda: datetime.now(UTC))
        super().__init__(env=dict(env))  # builds the key store, in `construct_mapper`
        self.hashes = KeyedHashes(self.keys)
        self.store = AggregateStore(self, self.keys, self.hashes, Lookups(self._datastore))
        self.keys.partitions = self.store.recorder().partitions
        # A ledger of the release before partitions is partitioned here, before any save
        # (once: later starts find nothing to place; persistence/upgrade.py).
        self.upgraded = self.store.recorder().upgrade(self.store.partition)
        """How many events this start placed in partitions (0 but on the first start after
        the release before partitions)."""
        self.memories = MemoryCommands(self.store, self.clock)
        self.candidates = CandidateCommands(self.memories, self.clock)
        self.forgetting = Forgetting(self.store, self.store.recorder(), self.clock)
        self.user_settings = SettingsCommands(self.store)
        self.access_log = AccessLog(self.store)
        self.rotation = KeyRotation(self._datastore, self.keys, self.keyring)

        # The commands, under the names every entry point calls.
        self.get_memory = self.memories.get
        self.create_memory = self.memories.create
        self.put_global_memory = self.memories.put_global
        self.update_memory = self.memories.update
        self.restore_version = self.memories.restore_version
        self.suppress_memory = self.memories.suppress
        self.restore_memory = self.memories.restore
        self.confirm_memory = self.memories.confirm
        self.forget_memory = self.forgetting.forget
        self.forget_by_key = self.forgetting.forget_by_key
        self.erase_user = self.forgetting.erase_user
        self.complete_shredding = self.forgetting.complete_shredding
        self.propose_candidate = self.candidates.propose
        self.accept_candidate = self.candidates.accept
        self.reject_candidate = self.candidates.reject
        self.expire_candidate = self.candidates.expire
        self.get_candidate = self.candidates.get
        self.get_settings = self.user_settings.get
        self.change_settings = self.user_settings.change
        self.record_access = self.access_log.record
        self.position = self.store.position
        self.recorded = self.store.recorded
        self.heads = self.store.heads
        self.legacy_position = self.store.legacy_position
        self.partition = self.store.partition

    def follow_revocations(self, wait: float = 5.0) -> bool:
        """Drop from this process's key cache every key another process destroys, as its
        transaction commits (a listener thread with a connection of its own, until `close`).
        Every process of the service calls it; True once it listens (within `wait` seconds;
        until then no cached key is trusted)."""
        if self._revocations is None:
            recorder = self.recorder
            assert isinstance(recorder, LedgerRecorder), "the ledger runs on its own recorder"
            self._revocations = RevocationListener.of(
                recorder.datastore, recorder.revocation_channel, self.keys
            )
        return self._revocations.start(wait) if not self._revocations.listening else True

    def close(self) -> None:
        if self._revocations is not None:
            self._revocations.stop()
            self._revocations = None
        recorder = self.recorder
        if isinstance(recorder, LedgerRecorder):
            recorder.notifier.close()  # its thread would wait for a save forever
        super().close()

    def tombstoned(self, aggregate_ids: Iterable[UUID]) -> set[UUID]:
        """Which of these aggregates have an event that destroys their key in the ledger (a
        forget, a rejection or an expiry): their content counts as gone, whatever keys the
        key table holds (restored from a backup, before `complete_shredding` ran)."""
        recorder = self.recorder
        assert isinstance(recorder, LedgerRecorder), "the ledger runs on its own recorder"
        return recorder.having_topics(list(set(aggregate_ids)), shredding_topics())

    def knows_user(self, user_id: str) -> bool:
        """Whether the ledger has anything of the user: a memory or candidate ever (forgotten
        ones included), or settings. What `erase_user` finds; reads the whole events table."""
        memory_ids, candidate_ids = self.store.owned(user_id)
        return bool(memory_ids or candidate_ids) or self.store.settings(user_id) is not None

    def memory_ids(self, user_id: str) -> list[UUID]:
        """Ids of the user's live memories (from the key table, not a projection)."""
        return self.keys.owned_keys(user_id, "memory")

    # -- the library's construction hooks ------------------------------------------------------

    def construct_env(self, name: str, env: Mapping[str, str] | None = None) -> Environment:
        # Configuration comes only from the settings object, never from os.environ here.
        # The pool's sessions are named after the master keys held (persistence/sessions.py).
        given = {**type(self).env, **(env or {})}
        schema = given.get("POSTGRES_SCHEMA", "")
        named = {SESSION_NAME_ENV: session_name(schema, self.keyring.held_ids)}
        return Environment(name, {**given, **named})

    def construct_mapper(self) -> SealingMapper:
        self.keys = DataKeyStore(self._datastore, self.keyring, cache_ttl=self._key_cache_ttl)
        return SealingMapper(self.construct_transcoder(), self.keys)

    @property
    def _datastore(self) -> Connections:
        factory = self.factory
        assert isinstance(factory, LedgerFactory), "the ledger runs on its own factory"
        return factory.datastore
