"""The SSE broker's pollers through a database outage: however many runs are watched and however many
ticks fail, the outage is one warning when it starts and one line when a read succeeds again; the
subscribers keep their position and get what was stored meanwhile."""

from __future__ import annotations

import asyncio
import logging
import time
from datetime import UTC, datetime

import pytest

from wepush.server.domain import DatabaseUnavailable, RunEvent
from wepush.server.infra.events import RunEventBroker, RunEventSubscriber

WORKSPACE = "ws-1"
RUNS = [f"run-{n}" for n in range(5)]
AT = datetime(2026, 8, 22, 8, 30, tzinfo=UTC)


class FlakyEvents:
    """A RunEventSource over lists that fails every read (as the unit of work does) while ``down``."""

    def __init__(self) -> None:
        self.events: dict[str, list[RunEvent]] = {run: [] for run in RUNS}
        self.down = False
        self.failed_reads = 0

    def append(self, run_id: str, event_type: str) -> None:
        stored = self.events[run_id]
        sequence = len(stored) + 1
        stored.append(
            RunEvent(
                workspace_id=WORKSPACE,
                run_id=run_id,
                sequence=sequence,
                type=event_type,
                occurred_at=AT,
                data={},
                created_at=AT,
            )
        )

    def _read(self) -> None:
        if self.down:
            self.failed_reads += 1
            try:
                raise ConnectionRefusedError(111, "Connect call failed ('127.0.0.1', 5432)")
            except OSError as refused:
                raise DatabaseUnavailable() from refused

    async def events_after(self, run_id: str, sequence: int, limit: int) -> list[RunEvent]:
        await asyncio.sleep(0)
        self._read()
        return [e for e in self.events[run_id] if e.sequence > sequence][:limit]

    async def head(self, workspace_id: str, run_id: str) -> int:
        self._read()
        return len(self.events[run_id])


async def test_an_outage_under_many_watched_runs_is_one_warning_and_one_recovery_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    source = FlakyEvents()
    broker = RunEventBroker(source, poll_interval=0.01)
    try:
        subscribers: dict[str, RunEventSubscriber] = {}
        for run in RUNS:
            subscribers[run] = broker.subscribe(WORKSPACE, run, after_sequence=0)
            assert await subscribers[run].next_event(0.01) is None  # replayed (nothing), now live
        source.down = True
        deadline = time.monotonic() + 60
        while source.failed_reads < 100:  # some twenty failed ticks per watched run
            assert time.monotonic() < deadline, "the pollers stopped polling"
            await asyncio.sleep(0.01)
        for run in RUNS:
            source.append(run, "RUN_CREATED")
        source.down = False
        received = {run: await subscriber.next_event(30.0) for run, subscriber in subscribers.items()}
    finally:
        await broker.stop()

    assert {run: event.sequence if event else None for run, event in received.items()} == dict.fromkeys(
        RUNS, 1
    )
    told = [r for r in caplog.records if r.name.startswith("wepush")]
    assert [(r.levelname, getattr(r, "event", None), r.exc_info) for r in told] == [
        ("WARNING", "EVENT_POLL_FAILED", None),
        ("INFO", "BACKGROUND_PASS_RECOVERED", None),
    ]
    assert told[0].getMessage().startswith("event poller failed: the database is unavailable")
    assert getattr(told[1], "loop", None) == "event poller"
    assert "Traceback" not in caplog.text
