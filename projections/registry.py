"""Every projection the worker runs and the rebuild command knows, by name."""

from __future__ import annotations

from collections.abc import Sequence

from projections.base import Projection
from projections.views.active_memories import ActiveMemories
from projections.views.audit_log import AuditLog
from projections.views.candidates import Candidates
from projections.views.embeddings import Embeddings
from projections.views.memory_versions import MemoryVersions
from projections.views.profile import Profile
from projections.views.search_terms import SearchTerms
from projections.views.tombstones import Tombstones
from projections.views.user_revisions import UserRevisions
from projections.views.vectors import PassageEmbedder

__all__ = ["all_projections", "main_projections", "select"]


def all_projections(embeddings: PassageEmbedder | None = None) -> list[Projection]:
    """A fresh instance of every projection (`embeddings`: the embedder vectors come from)."""
    # Applied in this order, each in a transaction of its own: the revisions before the
    # memories, so the search cache (retrieval/cache.py, rule 2) finds the revision table at
    # least as far along as the memories table between the two, and keeps serving its entries.
    return [
        UserRevisions(),
        ActiveMemories(),
        MemoryVersions(),
        AuditLog(),
        Tombstones(),
        Candidates(),
        Profile(),
        SearchTerms(),
        Embeddings(embeddings),
    ]


def main_projections() -> list[Projection]:
    """Every projection but embeddings, which runs in a worker of its own (slow to apply)."""
    return [p for p in all_projections() if p.name != Embeddings.name]


def select(names: Sequence[str], embeddings: PassageEmbedder | None = None) -> list[Projection]:
    """The projections with these names (all when none); unknown names raise KeyError."""
    known = {p.name: p for p in all_projections(embeddings)}
    if not names:
        return list(known.values())
    missing = [n for n in names if n not in known]
    if missing:
        raise KeyError(f"unknown projections: {', '.join(missing)}; known: {', '.join(known)}")
    return [known[n] for n in names]
