"""Lost races and outages: a command body raises `Retry` and `retrying` runs it again on fresh
state; a database outage (after persistence's own retries) becomes LedgerUnavailable."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Final, TypeVar

from eventsourcing.persistence import InterfaceError, OperationalError

from domain import deadline
from domain.errors import LedgerUnavailable

__all__ = ["ClaimTaken", "Retry", "outage_unavailable", "retrying"]

T = TypeVar("T")

ATTEMPTS: Final = 8


class Retry(Exception):
    """A concurrent writer won a race; run the command body again on fresh state."""


class ClaimTaken(Retry):
    """The save lost on a key claim: another live memory holds the (user, scope, key)."""


@contextmanager
def outage_unavailable() -> Iterator[None]:
    """Raise the persistence errors of an unreachable database as LedgerUnavailable.

    Only OperationalError and InterfaceError (connection lost, server shutting down, pool
    timeout, lock or statement timeout): other persistence errors are bugs and pass unchanged.
    """
    try:
        yield
    except (OperationalError, InterfaceError) as error:
        raise LedgerUnavailable(f"database unavailable: {type(error).__name__}") from error


def retrying(body: Callable[[], T]) -> T:
    """Run a command body until it saves without losing a race (bounded: LedgerUnavailable,
    after ATTEMPTS or once the caller's deadline has passed)."""
    attempt = 1
    with outage_unavailable():
        while True:
            try:
                return body()
            except Retry as error:
                if attempt >= ATTEMPTS or deadline.expired():
                    raise LedgerUnavailable("too much contention on this memory; retry") from error
            attempt += 1
