"""When a call is tried again, and after how long; shared by the sync and async clients.

What is retried:
  - 429: the server refused the call before running it (a per-user limit), so any call;
  - 503 and a connection lost after the request went out: only calls safe to repeat
    (`Call.idempotent`, see _calls.py), since the first attempt may have been carried out;
  - a connection that could not be opened (refused, connect timeout, pool full): any call,
    nothing was sent.
How long: the server's `Retry-After` when it gives one, else an exponential backoff with
jitter; never past the call's waiting budget (`Retries.max_wait`): a pause that would
overrun it ends the call at once with the last error.
"""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass
from typing import Any

import httpx2

from memledger_client._calls import Call
from memledger_client.errors import TransportFailed, error_for, retry_after_seconds

__all__ = ["Attempts", "Retries"]

_log = logging.getLogger("memledger_client")

_NOT_SENT = (httpx2.ConnectError, httpx2.ConnectTimeout, httpx2.PoolTimeout)
"""Transport errors raised before any byte of the request left: safe to retry any call."""


@dataclass(frozen=True)
class Retries:
    """The retry budget of one call: at most `max_retries` more attempts and `max_wait`
    seconds of waiting between them in all. `Retries(max_retries=0)` turns retrying off."""

    max_retries: int = 3
    max_wait: float = 30.0
    backoff: float = 0.5
    """The first pause when the server gives no Retry-After; it doubles each time."""
    max_backoff: float = 8.0

    def pause(self, attempt: int, retry_after: float | None) -> float:
        """Seconds to wait before attempt `attempt + 1` (0-based)."""
        if retry_after is not None:
            return retry_after
        ceiling = min(self.max_backoff, self.backoff * 2**attempt)
        return random.uniform(ceiling / 2, ceiling)  # jitter: clients do not retry in step


class Attempts:
    """The attempts of one call: after each, `answered` or `failed` says whether to try again
    (the pause, in seconds) or ends the call (a final answer, or an exception raised)."""

    def __init__(self, call: Call[Any], retries: Retries) -> None:
        self.call = call
        self.retries = retries
        self.count = 0
        self.waited = 0.0
        self.maybe_done = False
        """An earlier attempt may have been carried out (a 503, or a connection lost after
        the request was sent): a forget's "already gone" answer then means success."""

    def answered(self, response: httpx2.Response) -> float | None:
        """None: `response` is the call's answer (a success, or a forget already done).
        A number: retry after that many seconds. Otherwise the answer's APIError is raised."""
        status = response.status_code
        if response.is_success:
            return None
        if self.maybe_done and status == self.call.gone_means_done:
            return None
        retryable = status == 429 or (status == 503 and self.call.idempotent)
        error = error_for(response)
        pause = (
            self._next(retry_after_seconds(response), f"answered {status}") if retryable else None
        )
        if pause is None:
            raise error
        self.maybe_done = self.maybe_done or status == 503
        return pause

    def failed(self, error: httpx2.TransportError) -> float:
        """The pause before retrying after a transport error, or TransportFailed raised."""
        sent = not isinstance(error, _NOT_SENT)
        pause = None
        if not sent or self.call.idempotent:
            pause = self._next(None, f"failed: {type(error).__name__}")
        if pause is None:
            raise TransportFailed(
                f"{self.call.method} {self.call.path}: {type(error).__name__}: {error}"
            ) from error
        self.maybe_done = self.maybe_done or sent
        return pause

    def _next(self, retry_after: float | None, what: str) -> float | None:
        if self.count >= self.retries.max_retries:
            return None
        pause = self.retries.pause(self.count, retry_after)
        if self.waited + pause > self.retries.max_wait:
            return None
        self.count += 1
        self.waited += pause
        _log.warning(
            "%s %s %s; retry %d of %d in %.1f s",
            self.call.method,
            self.call.path,
            what,
            self.count,
            self.retries.max_retries,
            pause,
        )
        return pause
