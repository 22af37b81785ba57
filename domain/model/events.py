"""What every stored event shares: personal fields to seal, and the redacted placeholder."""

from __future__ import annotations

from typing import Any, ClassVar, Final

__all__ = ["REDACTED", "PersonalData", "is_redacted", "personal_fields"]

REDACTED: Final = "[redacted]"
"""Stands in for every personal field whose data key was destroyed (the memory was forgotten)."""


class PersonalData:
    """Mixin for events: `PERSONAL` names the fields sealed with the aggregate's data key."""

    PERSONAL: ClassVar[tuple[str, ...]] = ()


def personal_fields(event_class: type[Any]) -> tuple[str, ...]:
    """The fields of `event_class` that are encrypted at rest."""
    return getattr(event_class, "PERSONAL", ())


def is_redacted(event: object) -> bool:
    """True when the event was read after its data key was destroyed."""
    fields = personal_fields(type(event))
    return bool(fields) and all(getattr(event, name, None) == REDACTED for name in fields)
