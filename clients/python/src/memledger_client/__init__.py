"""memledger_client: the Python client of the memledger HTTP API (API_CONTRACT.md).

    from memledger_client import MemLedger

    with MemLedger("http://localhost:8000", token) as ledger:
        memory = ledger.create_memory("language", "Answer in Python", "preference")
        print(ledger.tools.search_core_memories("python").items)

`AsyncMemLedger` is the same client for asyncio. Errors are `errors.APIError` subclasses
carrying the contract's `reason`; models are in `models`.
"""

from memledger_client._calls import NOT_GIVEN, NotGiven
from memledger_client._retry import Retries
from memledger_client.async_client import AsyncMemLedger
from memledger_client.client import MemLedger
from memledger_client.errors import (
    APIError,
    CandidateDecided,
    Conflict,
    Forbidden,
    Forgotten,
    KeyExists,
    MemLedgerError,
    NotFound,
    PayloadTooLarge,
    RateLimited,
    RevisionConflict,
    SensitiveContent,
    ServerError,
    TransportFailed,
    Unauthorized,
    Unavailable,
    ValidationError,
)
from memledger_client.models import (
    AsOfView,
    AuditEvent,
    AuditPage,
    Candidate,
    CandidateDecision,
    Change,
    ChangePage,
    Memory,
    MemoryPage,
    MemorySettings,
    SearchResult,
    Version,
)

__all__ = [
    "NOT_GIVEN",
    "APIError",
    "AsOfView",
    "AsyncMemLedger",
    "AuditEvent",
    "AuditPage",
    "Candidate",
    "CandidateDecided",
    "CandidateDecision",
    "Change",
    "ChangePage",
    "Conflict",
    "Forbidden",
    "Forgotten",
    "KeyExists",
    "MemLedger",
    "MemLedgerError",
    "Memory",
    "MemoryPage",
    "MemorySettings",
    "NotFound",
    "NotGiven",
    "PayloadTooLarge",
    "RateLimited",
    "Retries",
    "RevisionConflict",
    "SearchResult",
    "SensitiveContent",
    "ServerError",
    "TransportFailed",
    "Unauthorized",
    "Unavailable",
    "ValidationError",
    "Version",
]
