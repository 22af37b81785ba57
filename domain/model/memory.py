"""The Memory aggregate: one small, stable fact or preference a user owns (sections 7, 9, 17)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar, cast
from uuid import UUID

from eventsourcing.domain import Aggregate
from eventsourcing.utils import get_topic

from domain.errors import InvalidInput, MemoryForgotten, RevisionConflict
from domain.model.events import PersonalData
from domain.model.values import Scope, check_id, normalise_content

__all__ = ["Memory", "Version"]


@dataclass(frozen=True, slots=True)
class Version:
    """One content version of a memory, as the versions API shows it."""

    revision: int
    content: str
    category: str
    change_type: str
    changed_via: str
    source_candidate_id: UUID | None
    created_at: datetime


class Memory(Aggregate):
    """A memory; `revision` counts content versions, `version` counts events."""

    TOPIC = "memledger:Memory"

    class Event(Aggregate.Event, PersonalData):
        """Base of Memory events: each says in clear whose memory, where, at which revision.

        That is what audit needs, and it lets every projection handle an event on its own.
        """

        user_id: str
        scope_type: str
        workspace_type: str | None
        revision: int

    class Created(Event, Aggregate.Created):
        """A memory was created (explicitly, from a candidate, or by migration).

        `origin` (version 2) keeps, in clear, where a migrated memory came from and its
        original timestamps, e.g. {"system": "legacy-coremem", "created_at": "2024-...Z"}.
        It is data only: `created_at` of the memory stays the time of this event.
        """

        TOPIC = "memledger:Memory.Created"
        PERSONAL: ClassVar[tuple[str, ...]] = ("memory_key", "content")
        class_version = 2
        memory_key: str
        content: str
        content_hash: str
        category: str
        source_type: str
        changed_via: str
        source_candidate_id: UUID | None
        review_after: datetime | None
        expires_at: datetime | None
        origin: dict[str, str] | None = None

        @staticmethod
        def upcast_v1_v2(state: dict[str, Any]) -> None:
            """Version 1 had no origin: every memory was created in the ledger itself."""
            state["origin"] = None

    class ContentChanged(Event):
        """Base of the events that make a new content version (never triggered itself)."""

        TOPIC = "memledger:Memory.ContentChanged"

        PERSONAL: ClassVar[tuple[str, ...]] = ("content",)
        content: str
        content_hash: str
        category: str
        changed_via: str
        source_candidate_id: UUID | None

        CHANGE_TYPE: ClassVar[str] = ""

        def apply(self, aggregate: Any) -> None:
            aggregate._new_version(self, self.CHANGE_TYPE)

    class Updated(ContentChanged):
        """The content or category was corrected."""

        TOPIC = "memledger:Memory.Updated"
        CHANGE_TYPE: ClassVar[str] = "update"

    class Replaced(ContentChanged):
        """The value was replaced by a conflicting one the user chose explicitly."""

        TOPIC = "memledger:Memory.Replaced"
        CHANGE_TYPE: ClassVar[str] = "replace"

    class VersionRestored(ContentChanged):
        """An earlier version's content became a new revision."""

        TOPIC = "memledger:Memory.VersionRestored"
        CHANGE_TYPE: ClassVar[str] = "restore"
        from_revision: int

    class Confirmed(Event):
        """The user confirmed the memory is still right (same content saved again)."""

        TOPIC = "memledger:Memory.Confirmed"

        def apply(self, aggregate: Any) -> None:
            aggregate.last_confirmed_at = self.timestamp

    class Suppressed(Event):
        """The memory stops taking part in retrieval until restored."""

        TOPIC = "memledger:Memory.Suppressed"

        def apply(self, aggregate: Any) -> None:
            aggregate.status = "suppressed"

    class Restored(Event):
        """A suppressed memory takes part in retrieval again."""

        TOPIC = "memledger:Memory.Restored"

        def apply(self, aggregate: Any) -> None:
            aggregate.status = "active"

    class ScheduleChanged(Event):
        """The review date or the expiry changed."""

        TOPIC = "memledger:Memory.ScheduleChanged"
        review_after: datetime | None
        expires_at: datetime | None

        def apply(self, aggregate: Any) -> None:
            aggregate.review_after = self.review_after
            aggregate.expires_at = self.expires_at

    class Forgotten(Event):
        """Tombstone: the content is destroyed for good (its data key is shredded with it)."""

        TOPIC = "memledger:Memory.Forgotten"
        deleted_at: datetime
        final_revision: int

        def apply(self, aggregate: Any) -> None:
            aggregate.status = "forgotten"
            aggregate.content = ""
            aggregate.memory_key = ""
            aggregate.versions = []

    def __init__(
        self,
        user_id: str,
        scope_type: str,
        workspace_type: str | None,
        memory_key: str,
        content: str,
        category: str,
        source_type: str,
        changed_via: str,
        source_candidate_id: UUID | None,
        review_after: datetime | None,
        expires_at: datetime | None,
        origin: dict[str, str] | None = None,
    ) -> None:
        self.user_id = user_id
        self.scope = Scope(scope_type, workspace_type)
        self.memory_key = memory_key
        self.content = content
        self.category = category
        self.source_type = source_type
        self.status = "active"
        self.revision = 1
        self.last_confirmed_at: datetime | None = None
        self.review_after = review_after
        self.expires_at = expires_at
        self.origin = origin
        self.versions: list[Version] = [
            Version(
                1, content, category, "create", changed_via, source_candidate_id, self.created_on
            )
        ]

    @classmethod
    def new(cls, memory_id: UUID, **fields: Any) -> Memory:
        """Create a memory under an id chosen beforehand (its data key is made first)."""
        # The library's `_create` for a given id, less its per-call checks (the topic's
        # registration, tested once in test_event_topics) and its copies of the arguments: the
        # same event class, constructor and `mutate` make the same event and aggregate.
        if not isinstance(memory_id, UUID):
            raise TypeError(f"Given id was not a UUID: {memory_id!r}")
        check_id("user_id", fields["user_id"])  # stored in clear on every event
        event_class: Any = cls.Created  # mypy sees the library's Created here
        created = event_class(
            originator_topic=get_topic(cls),
            originator_id=memory_id,
            originator_version=cls.INITIAL_VERSION,
            timestamp=event_class.create_timestamp(),
            revision=1,
            **fields,
        )
        memory = cast(Memory, created.mutate(None))
        memory.pending_events.append(created)
        return memory

    def trigger_event(self, event_class: Any, **kwargs: Any) -> None:
        """Trigger an event stamped with the memory's owner, scope and revision."""
        kwargs.setdefault("revision", self.revision)
        super().trigger_event(
            event_class,
            user_id=self.user_id,
            scope_type=self.scope.scope_type,
            workspace_type=self.scope.workspace_type,
            **kwargs,
        )

    # -- queries ---------------------------------------------------------------------------

    @property
    def is_forgotten(self) -> bool:
        """True once the tombstone was appended."""
        return self.status == "forgotten"

    @property
    def updated_at(self) -> datetime:
        """When the last event of this memory happened."""
        return self.modified_on

    def has_same_content(self, content: str) -> bool:
        """True when `content` equals the current content after normalisation."""
        return normalise_content(content) == normalise_content(self.content)

    # -- commands (validate first, then trigger: apply methods must never fail on replay) ----

    def change_content(
        self,
        *,
        expected_revision: int | None,
        content: str,
        content_hash: str,
        category: str,
        changed_via: str,
        replace: bool = False,
        source_candidate_id: UUID | None = None,
    ) -> bool:
        """Make a new revision; False (and nothing recorded) when nothing would change."""
        self._require_live()
        self.check_revision(expected_revision)
        if self.has_same_content(content) and category == self.category:
            return False
        self.trigger_event(
            self.Replaced if replace else self.Updated,
            content=content,
            content_hash=content_hash,
            category=category,
            revision=self.revision + 1,
            changed_via=changed_via,
            source_candidate_id=source_candidate_id,
        )
        return True

    def restore_version(
        self, *, revision: int, expected_revision: int, content_hash: str, changed_via: str
    ) -> None:
        """Copy an earlier version's content into a new revision (numbers never go back)."""
        self._require_live()
        self.check_revision(expected_revision)
        old = self.find_version(revision)
        self.trigger_event(
            self.VersionRestored,
            content=old.content,
            content_hash=content_hash,
            category=old.category,
            revision=self.revision + 1,
            changed_via=changed_via,
            source_candidate_id=None,
            from_revision=revision,
        )

    def find_version(self, revision: int) -> Version:
        """The version with that revision, or InvalidInput."""
        for candidate in self.versions:
            if candidate.revision == revision:
                return candidate
        raise InvalidInput("revision", f"memory has no revision {revision}")

    def confirm(self) -> None:
        """Refresh last_confirmed_at (an idempotent save of the same content)."""
        self._require_live()
        self.trigger_event(self.Confirmed)

    def suppress(self) -> bool:
        """Stop taking part in retrieval; False when already suppressed."""
        self._require_live()
        if self.status == "suppressed":
            return False
        self.trigger_event(self.Suppressed)
        return True

    def restore(self) -> bool:
        """Take part in retrieval again; False when already active."""
        self._require_live()
        if self.status == "active":
            return False
        self.trigger_event(self.Restored)
        return True

    def reschedule(self, *, review_after: datetime | None, expires_at: datetime | None) -> bool:
        """Change review and expiry dates; False when both are unchanged."""
        self._require_live()
        if (review_after, expires_at) == (self.review_after, self.expires_at):
            return False
        self.trigger_event(self.ScheduleChanged, review_after=review_after, expires_at=expires_at)
        return True

    def forget(self, deleted_at: datetime) -> None:
        """Append the plaintext tombstone; the caller shreds the data key in the same save."""
        self._require_live()
        self.trigger_event(
            self.Forgotten,
            deleted_at=deleted_at,
            final_revision=self.revision,
        )

    def _require_live(self) -> None:
        if self.is_forgotten:
            raise MemoryForgotten(self.id)

    def check_revision(self, expected_revision: int | None) -> None:
        """RevisionConflict unless `expected_revision` is None or the current revision."""
        if expected_revision is not None and expected_revision != self.revision:
            raise RevisionConflict(self.revision)

    def _new_version(self, event: Memory.ContentChanged, change_type: str) -> None:
        self.content = event.content
        self.category = event.category
        self.revision = event.revision
        self.versions.append(
            Version(
                event.revision,
                event.content,
                event.category,
                change_type,
                event.changed_via,
                event.source_candidate_id,
                event.timestamp,
            )
        )
