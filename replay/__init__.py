"""Auditor replay: the ledger's history as JSON-ready records, and as-of views of a user.

    from replay import ReplayQuery, replay, replay_events, as_of

    replay_events(ledger, user_id="alice", since=t0)      # one dict per event, position order
    as_of(ledger, "alice", t1)                            # her memories as they stood at t1
    replay(ledger, ReplayQuery(user_id="alice", as_of=t1))  # either, from one checked query

Everything reads the ledger itself, never a projection, so it is exact at every position.
Content is decrypted while its data key exists; where the key was destroyed (forgotten
memories, rejected or expired candidates) a record says `"redacted": true` and leaves the
personal fields out. Nothing here prints or parses command lines: `api.cli.replay` and HTTP
routes are front ends over these functions.
"""

from replay.as_of import as_of
from replay.events import replay_events
from replay.query import InvalidQuery, ReplayQuery, parse_time, replay
from replay.reading import ReplayError

__all__ = [
    "InvalidQuery",
    "ReplayError",
    "ReplayQuery",
    "as_of",
    "parse_time",
    "replay",
    "replay_events",
]
