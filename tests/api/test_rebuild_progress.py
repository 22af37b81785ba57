"""`projections rebuild` shows progress that moves: events done, events/s and time left, as a
rich bar on a terminal and as plain lines otherwise (issue 24: it showed `0/1250 None
events/s` for the whole run, then jumped to the end)."""

from __future__ import annotations

import io
import re
from typing import Any

from typer.testing import CliRunner

from api.cli import app
from api.cli.progress import EventProgress
from api.cli.projections import BATCH as CLI_BATCH
from domain.ledger.ledger import MemoryLedger
from domain.model.values import Scope
from projections.applying import BATCH


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_plain_lines_carry_the_rate_and_time_left_at_most_every_few_seconds() -> None:
    clock, out = Clock(), io.StringIO()
    with EventProgress(
        "replaying", 1000, then="swapping in", stream=out, tty=False, every=5, clock=clock
    ) as progress:
        for seconds, events in [(1, 100), (2, 100), (7, 300), (8, 500)]:
            clock.now = 100.0 + seconds
            progress.advance(events)

    assert out.getvalue().splitlines() == [
        "memledger: replaying: 100/1000 events (10%), 100 events/s, ETA 0:09",
        # at 2 s nothing: less than 5 s since the last line
        "memledger: replaying: 500/1000 events (50%), 71 events/s, ETA 0:07",
        "memledger: replaying: 1000/1000 events (100%), 125 events/s, ETA 0:00",
        "memledger: swapping in",
    ]


def test_the_last_count_is_written_at_the_end_when_no_line_said_it() -> None:
    clock, out = Clock(), io.StringIO()
    with EventProgress("replaying", 10, stream=out, tty=False, every=5, clock=clock) as progress:
        clock.now += 1
        progress.advance(4)
        clock.now += 1
        progress.advance(4)  # within 5 s: not written then

    assert out.getvalue().splitlines()[-1].startswith("memledger: replaying: 8/10 events (80%)")


def test_on_a_terminal_the_bar_shows_the_rate_and_time_left() -> None:
    clock, out = Clock(), io.StringIO()
    with EventProgress("replaying", 1000, stream=out, tty=True, clock=clock) as progress:
        clock.now += 2
        progress.advance(500)

    shown = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", out.getvalue())
    assert "500/1000" in shown and "250 events/s" in shown and "ETA 0:02" in shown
    assert "None" not in shown


def test_a_rebuild_without_a_terminal_writes_lines_that_move(
    ledger: MemoryLedger, env: dict[str, Any]
) -> None:
    for i in range(120):
        ledger.create_memory(
            "alice", scope=Scope.global_(), memory_key=f"k{i}", content="c", category="fact"
        )
    total = ledger.recorded()

    result = CliRunner().invoke(app, ["projections", "rebuild", "candidates"], env=env)

    assert result.exit_code == 0, result.output
    counts = [
        int(m.group(1))
        for m in re.finditer(
            rf"replaying the ledger: (\d+)/{total} events .*? events/s, ETA ", result.stderr
        )
    ]
    assert counts[0] < total and counts[-1] == total, result.stderr  # a small ledger: steps
    assert "memledger: checking against live and swapping in" in result.stderr
    assert "None" not in result.stderr


def test_the_clis_default_batch_is_the_projections_batch() -> None:
    """The CLI keeps its own copy (it starts without importing the projections)."""
    assert CLI_BATCH == BATCH
