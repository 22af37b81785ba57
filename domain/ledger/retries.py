"""Lost races: a command body raises `Retry` and `retrying` runs it again on fresh state."""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, TypeVar

from domain.errors import LedgerUnavailable

__all__ = ["ClaimTaken", "Retry", "retrying"]

T = TypeVar("T")

ATTEMPTS: Final = 8


class Retry(Exception):
    """A concurrent writer won a race; run the command body again on fresh state."""


class ClaimTaken(Retry):
    """The save lost on a key claim: another live memory holds the (user, scope, key)."""


def retrying(body: Callable[[], T]) -> T:
    """Run a command body until it saves without losing a race (bounded: LedgerUnavailable)."""
    for _ in range(ATTEMPTS - 1):
        try:
            return body()
        except Retry:
            continue
    try:
        return body()
    except Retry as error:
        raise LedgerUnavailable("too much contention on this memory; retry") from error
