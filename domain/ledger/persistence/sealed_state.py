"""The sealed event format in SQL, for readers that filter or group events in the database."""

from __future__ import annotations

from psycopg.sql import SQL, Composable, Composed

__all__ = ["clear_json"]


def clear_json(state: Composable) -> Composed:
    """SQL: the clear part of a stored event's `state` (bytea) as `json`, sealed or not.

    Lets the database read the clear fields (e.g. `->> 'user_id'`) without any key. It raises
    (invalid UTF-8 or JSON) on a state this format did not write.
    """
    return SQL(
        "convert_from(CASE WHEN substring({0} FROM 1 FOR 4) = '\\x4d4c5331'::bytea"
        " THEN substring({0} FROM 9 FOR (get_byte({0}, 4) << 24) | (get_byte({0}, 5) << 16)"
        " | (get_byte({0}, 6) << 8) | get_byte({0}, 7)) ELSE {0} END, 'UTF8')::json"
    ).format(state)
