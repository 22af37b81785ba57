"""ReplayQuery.check and parse_time: what a front end learns before it opens the ledger."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from replay import InvalidQuery, ReplayQuery, parse_time

AT = datetime(2026, 6, 1, 12, tzinfo=UTC)


def test_event_filters_alone_are_always_answerable() -> None:
    ReplayQuery(user_id=None, after=3, until=9, since=AT, before=AT).check()


def test_as_of_needs_the_user_whose_memories() -> None:
    with pytest.raises(InvalidQuery) as caught:
        ReplayQuery(as_of=AT).check()
    assert caught.value.missing == "user_id" and caught.value.conflicts == ()


def test_as_of_names_every_event_filter_it_cannot_apply() -> None:
    query = ReplayQuery(user_id="alice", after=1, until=5, before=AT, as_of=AT)
    with pytest.raises(InvalidQuery) as caught:
        query.check()
    assert caught.value.missing is None
    assert caught.value.conflicts == ("after", "until", "before")


def test_as_of_accepts_the_default_start_position() -> None:
    ReplayQuery(user_id="alice", after=0, as_of=AT).check()  # after=0: from the start


def test_parse_time_reads_a_naive_time_as_utc_and_keeps_an_offset() -> None:
    assert parse_time(" 2026-06-01T12:00:00 ") == AT
    plus_two = timezone(timedelta(hours=2))
    assert parse_time("2026-06-01T14:00:00+02:00") == datetime(2026, 6, 1, 14, tzinfo=plus_two)
    assert parse_time("2026-06-01T12:00:00Z") == AT


def test_parse_time_refuses_text_that_is_not_a_time() -> None:
    with pytest.raises(ValueError, match="'yesterday' is not a time"):
        parse_time("yesterday")
