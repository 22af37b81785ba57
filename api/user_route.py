"""The route class of the user's own APIs (/me/*, /audit/*): refused to agent-turn tokens."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

from fastapi.routing import APIRoute

from service.caller import require_owner

__all__ = ["UserRoute"]


class UserRoute(APIRoute):
    """A route of the user's own APIs (/me/*, /audit/*): refused to agent-turn tokens.

    An agent turn (mode no_write or isolated, or a tools list) acts only through the tools, so
    a mode can never be widened through the management API: 403 `agent_token`
    (`service.caller.require_owner`, the rule's one statement). The check wraps
    the endpoint, so it runs after identity (401) and request validation (422), as the
    contract orders them; every endpoint of such a router takes `identity: CurrentIdentity`.
    """

    def __init__(self, path: str, endpoint: Callable[..., Any], **kwargs: Any) -> None:
        super().__init__(path, _refusing_agent_turns(endpoint), **kwargs)


def _refusing_agent_turns(endpoint: Callable[..., Any]) -> Callable[..., Any]:
    if "identity" not in inspect.signature(endpoint).parameters or inspect.iscoroutinefunction(
        endpoint
    ):
        raise TypeError(f"{endpoint.__name__}: a UserRoute endpoint is sync and takes `identity`")

    @functools.wraps(endpoint)
    def checked(*args: Any, **kwargs: Any) -> Any:
        require_owner(kwargs["identity"])
        return endpoint(*args, **kwargs)

    return checked
