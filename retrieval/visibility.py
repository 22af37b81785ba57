"""Which memories a search may return: the visibility and shadowing rule, stated once.

A memory takes part in a search for an agent in workspace W when it is

1. retrievable: `status = 'active'` and not expired (`expires_at` unset or after now);
2. visible: global, or in W itself (`domain.policy.is_visible`, `visible_scopes(W)`);
3. not shadowed: a global memory is hidden when a memory of W that is itself retrievable holds
   the same `memory_key` (the workspace value overrides the global one).

`visible_rows` applies the rule to rows in Python. The same rule has two faster forms, which
must stay equal to this one (tests/retrieval/test_search_fetch.py and test_vector_matrix.py
compare them with it):

- SQL, for the narrow lexical fetch: retrieval/fetch_sql.py (`Statements` filters scope,
  status and expiry and computes `hidden` per row from live workspace rows with the same key);
  `projections.views.search_terms.next_shadow_expiry` says when a hiding row expires;
- numpy, for vector search: `retrieval.vectors.matrix.UserVectors.visible`.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import TYPE_CHECKING

from domain.policy import is_visible

if TYPE_CHECKING:
    from retrieval.query import SearchRow

__all__ = ["is_visible", "retrievable", "shadow_global", "visible_rows"]


def retrievable(status: str, expires_at: datetime | None, now: datetime) -> bool:
    """True for an active memory that has not expired: only those take part in retrieval."""
    return status == "active" and (expires_at is None or expires_at > now)


def shadow_global(rows: Iterable[SearchRow]) -> list[SearchRow]:
    """Drop each global memory whose key a workspace memory among `rows` also holds."""
    pool = list(rows)
    overridden = {r.memory_key for r in pool if r.scope_type == "workspace"}
    return [r for r in pool if r.scope_type == "workspace" or r.memory_key not in overridden]


def visible_rows(rows: Iterable[SearchRow], workspace: str, now: datetime) -> list[SearchRow]:
    """The rows an agent in `workspace` may be given now: retrievable, visible, not shadowed."""
    return shadow_global(
        r
        for r in rows
        if r.is_retrievable(now) and is_visible(r.scope_type, r.workspace_type, workspace)
    )
