"""Following the change feed's event stream, resumed after each dropped connection; shared by
the sync and async clients (`stream_changes`)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator

import httpx2

from memledger_client import _calls as calls
from memledger_client import models as m
from memledger_client._base import STREAM_READ_TIMEOUT, AsyncSender, Sender
from memledger_client._retry import Retries
from memledger_client._sse import EventDecoder
from memledger_client.errors import TransportFailed

__all__ = ["follow", "follow_async"]


def follow(client: Sender, cursor: str, retries: Retries) -> Iterator[m.Change]:
    """The changes after `cursor`, without end; a failed connection is opened again after the
    last change delivered, at most `retries.max_retries` times in a row."""
    decoder, failures = EventDecoder(), 0
    while True:
        call, headers = _request(cursor)
        try:
            with client._stream(call, headers, STREAM_READ_TIMEOUT) as answer:
                for line in answer.iter_lines():
                    if (event := decoder.feed(line)) is not None:
                        change = m.Change.model_validate_json(event.data)
                        cursor, failures = change.cursor, 0
                        yield change
        except (httpx2.TransportError, TransportFailed):
            pass  # resumed below, from the last change delivered
        failures += 1
        time.sleep(_pause(failures, decoder, retries))


async def follow_async(
    client: AsyncSender, cursor: str, retries: Retries
) -> AsyncIterator[m.Change]:
    """`follow`, awaited."""
    decoder, failures = EventDecoder(), 0
    while True:
        call, headers = _request(cursor)
        try:
            async with client._stream(call, headers, STREAM_READ_TIMEOUT) as answer:
                async for line in answer.aiter_lines():
                    if (event := decoder.feed(line)) is not None:
                        change = m.Change.model_validate_json(event.data)
                        cursor, failures = change.cursor, 0
                        yield change
        except (httpx2.TransportError, TransportFailed):
            pass  # resumed below, from the last change delivered
        failures += 1
        await asyncio.sleep(_pause(failures, decoder, retries))


def _request(cursor: str) -> tuple[calls.Call[m.ChangePage], dict[str, str]]:
    # The cursor goes as Last-Event-ID (the standard's resume header, which the server prefers)
    # and as `after`, so a proxy that drops the header still resumes at the same place.
    return calls.changes(cursor, None), {"Accept": "text/event-stream", "Last-Event-ID": cursor}


def _pause(failures: int, decoder: EventDecoder, retries: Retries) -> float:
    if failures > retries.max_retries:
        raise TransportFailed(f"the change stream failed {failures} times in a row")
    asked = None if decoder.retry is None else decoder.retry / 1000  # the stream's `retry:`
    return retries.pause(failures - 1, asked)
