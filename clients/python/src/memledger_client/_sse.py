"""Server-Sent Events, decoded line by line (the WHATWG event stream format)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Event", "EventDecoder"]


@dataclass(frozen=True)
class Event:
    """One dispatched event: `id` is the stream's last event id when it was dispatched."""

    event: str
    data: str
    id: str | None
    retry: int | None = None


class EventDecoder:
    """Feed it the stream's lines (without their line ending); it returns an Event at each
    blank line that ends one. Comments (the server's heartbeats) are skipped."""

    def __init__(self) -> None:
        self.last_id: str | None = None
        self.retry: int | None = None
        self._event = ""
        self._data: list[str] = []

    def feed(self, line: str) -> Event | None:
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        match name:
            case "event":
                self._event = value
            case "data":
                self._data.append(value)
            case "id" if "\0" not in value:
                self.last_id = value
            case "retry" if value.isdigit():
                self.retry = int(value)
        return None

    def _dispatch(self) -> Event | None:
        event, data = self._event or "message", "\n".join(self._data)
        had_data = bool(self._data)
        self._event, self._data = "", []
        if not had_data:
            return None
        return Event(event, data, self.last_id, self.retry)
