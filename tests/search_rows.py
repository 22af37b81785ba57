"""One way for tests to build the rows lexical and hybrid ranking work on (retrieval.query)."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import uuid4

from retrieval.query import SearchRow


def search_row(
    key: str,
    content: str,
    *,
    updated_at: datetime,
    category: str = "fact",
    workspace: str | None = None,
    status: str = "active",
    **dates: Any,
) -> SearchRow:
    """An explicit memory of `key`: global, or in `workspace` when one is given."""
    return SearchRow(
        memory_id=uuid4(),
        memory_key=key,
        content=content,
        category=category,
        scope_type="global" if workspace is None else "workspace",
        workspace_type=workspace,
        source_type="explicit",
        status=status,
        updated_at=updated_at,
        **dates,
    )
