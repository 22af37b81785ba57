"""The checks every agent tool call passes before it acts: values, then the policy.

The contract's order (API_CONTRACT.md, 'Agent tools'): identity (the door's), body and value
checks (422, `check_values`), the policy (403, `allowed`, domain/policy.py), then the memory
itself (404 / 410 / 409). A denial is counted, logged and queued for audit (section 17:
`memory.policy_denied`, ids and reason, never content).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager

from domain import policy
from domain.context import current_request_id
from domain.errors import PolicyDenied
from domain.model.values import check_category, check_content, check_key
from domain.model.workspace_rules import check_workspace_content
from service.caller import Identity
from service.ports import Ports

__all__ = ["allowed", "check_values"]

_log = logging.getLogger("memledger.tools")


@contextmanager
def allowed(ports: Ports, caller: Identity, tool: str) -> Iterator[str]:
    """Time the call and apply the policy; yields the caller's workspace once allowed."""
    started = time.perf_counter()
    try:
        yield _allow(ports, caller, tool)
    finally:
        ports.metrics.tool_latency.labels(tool).observe(time.perf_counter() - started)


def _allow(ports: Ports, caller: Identity, tool: str) -> str:
    context = policy.TurnContext(
        caller.workspace, caller.mode, caller.tools, ports.ledger.get_settings(caller.user_id)
    )
    reason = policy.denial(tool, context)
    if reason is None:
        assert caller.workspace is not None  # the policy's first rule
        return caller.workspace
    ports.metrics.denials.labels(reason).inc()
    if ports.access_log is not None:
        ports.access_log.denied(caller.user_id, tool, caller.workspace, reason)
    _log.warning(
        "memory.policy_denied tool=%s reason=%s",
        tool,
        reason,
        extra={"request_id": current_request_id(), "user_id": caller.user_id},
    )
    raise PolicyDenied(reason, f"{tool} is not allowed in this turn: {reason}")


def check_values(
    memory_key: str | None, content: str | None, category: str | None, workspace: str | None
) -> tuple[str, str, str]:
    """The domain's value checks (422: secrets and the workspace's content rules included)."""
    checked = (
        check_key(memory_key) if memory_key is not None else "",
        check_content(content) if content is not None else "",
        check_category(category) if category is not None else "",
    )
    if content is not None:
        check_workspace_content(workspace, checked[1])
    return checked
