"""Run progress counts against the run's whole recipient set, not what the engine has read so far."""

from __future__ import annotations

from datetime import UTC, datetime

from wepush.agent.engine import RunEvent, RunEventType
from wepush.server.application.execution._events import counts_from, with_planned_total

AT = datetime(2026, 12, 7, tzinfo=UTC)


def _progress(**data: int) -> RunEvent:
    return RunEvent(run_id="run-1", sequence=4, type=RunEventType.PROGRESS, occurred_at=AT, data=data)


def test_recipients_not_read_yet_are_pending_of_the_planned_total() -> None:
    # The engine has read its first 1,000 of 5,001 recipients: 2 in flight, 998 waiting, 0 done.
    event = with_planned_total(_progress(total=1000, pending=998, inFlight=2, succeeded=0), 5001)

    assert (event.data["total"], event.data["pending"], event.data["inFlight"]) == (5001, 4999, 2)
    assert (event.sequence, event.type, event.occurred_at) == (4, RunEventType.PROGRESS, AT)
    assert counts_from(event.data).total == 5001


def test_a_progress_that_has_read_everything_is_left_as_it_is() -> None:
    event = _progress(total=5001, pending=0, inFlight=0, succeeded=5001)
    assert with_planned_total(event, 5001) is event


def test_other_events_are_left_as_they_are() -> None:
    started = RunEvent(
        run_id="run-1", sequence=3, type=RunEventType.RUN_STARTED, occurred_at=AT, data={"total": 3}
    )
    assert with_planned_total(started, 5001) is started
