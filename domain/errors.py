"""Domain errors: raised by aggregates and commands, mapped to HTTP in one place by the API."""

from __future__ import annotations

from uuid import UUID

__all__ = [
    "CandidateNotPending",
    "DomainError",
    "InvalidInput",
    "KeyExists",
    "LedgerUnavailable",
    "MasterKeyMissing",
    "MemoryForgotten",
    "NotFound",
    "PolicyDenied",
    "RevisionConflict",
    "SensitiveContent",
]


class DomainError(Exception):
    """Base class of every error a command may raise on purpose."""


class InvalidInput(DomainError):
    """A value breaks a rule of the model (scope, key, category, length, time)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class SensitiveContent(InvalidInput):
    """The text holds a secret or credential the ledger must never store (section 15)."""

    def __init__(self, field: str, kind: str, description: str) -> None:
        super().__init__(field, f"looks like {description}; secrets are never stored")
        self.kind = kind


class NotFound(DomainError):
    """No such memory or candidate for this user (another user's is reported the same way)."""


class MemoryForgotten(DomainError):
    """The memory was forgotten; its content is gone for good."""

    def __init__(self, memory_id: UUID) -> None:
        super().__init__(f"memory {memory_id} was forgotten")
        self.memory_id = memory_id


class RevisionConflict(DomainError):
    """The caller's expected revision is stale."""

    def __init__(self, current_revision: int) -> None:
        super().__init__(f"revision conflict: current revision is {current_revision}")
        self.current_revision = current_revision


class KeyExists(DomainError):
    """A live memory already holds this key in this scope, with different content."""

    def __init__(self, memory_id: UUID) -> None:
        super().__init__(f"a memory with this key already exists: {memory_id}")
        self.memory_id = memory_id


class CandidateNotPending(DomainError):
    """The candidate was already accepted, rejected or has expired."""

    def __init__(self, status: str) -> None:
        super().__init__(f"candidate is {status}, not pending")
        self.status = status


class PolicyDenied(DomainError):
    """The effective permission does not allow this call (reason is a fixed string)."""

    def __init__(self, reason: str, message: str = "") -> None:
        super().__init__(message or reason)
        self.reason = reason


class LedgerUnavailable(DomainError):
    """The ledger could not complete the write (database down or contended); safe to retry."""


class MasterKeyMissing(LedgerUnavailable):
    """A data key is wrapped under a master key this process does not hold (`master_id`): a key
    rotation it did not follow. The operator adds that key to its configuration and restarts it
    (docs/operations.md, "Master key rotation"); until then the commands needing that data key
    fail."""

    def __init__(self, master_id: str) -> None:
        super().__init__(
            f"a data key is wrapped under master key {master_id}, which this process does not"
            " hold: add it to MEMLEDGER_MASTER_KEY (after the active key) and restart"
        )
        self.master_id = master_id
