"""The SSE broker on an in-memory event source: one poller per run, fan-out without gaps or duplicates,
slow subscribers dropped instead of waited on."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest

from wepush.server.application.runs import EventStreamEnded
from wepush.server.domain import RunEvent
from wepush.server.infra.events import RunEventBroker, RunEventSubscriber

RUN = "run-1"
WORKSPACE = "ws-1"
AT = datetime(2026, 8, 22, 8, 30, tzinfo=UTC)


class MemoryEvents:
    """A RunEventSource over a list; counts the reads so tests can see who polls."""

    def __init__(self) -> None:
        self.events: list[RunEvent] = []
        self.reads = 0

    def append(self, *types: str) -> None:
        for event_type in types:
            sequence = len(self.events) + 1
            self.events.append(
                RunEvent(
                    workspace_id=WORKSPACE,
                    run_id=RUN,
                    sequence=sequence,
                    type=event_type,
                    occurred_at=AT,
                    data={"n": sequence},
                    created_at=AT,
                )
            )

    async def events_after(self, run_id: str, sequence: int, limit: int) -> list[RunEvent]:
        self.reads += 1
        await asyncio.sleep(0)
        return [e for e in self.events if e.sequence > sequence][:limit]

    async def head(self, workspace_id: str, run_id: str) -> int:
        return len(self.events)


async def _drain(subscriber: RunEventSubscriber, count: int) -> list[int]:
    received: list[int] = []
    while len(received) < count:
        event = await subscriber.next_event(5.0)
        assert event is not None, "timed out waiting for an event"
        received.append(event.sequence)
    return received


async def test_a_subscriber_replays_then_follows_live_events_without_gaps_or_duplicates() -> None:
    source = MemoryEvents()
    source.append("RUN_CREATED", "RUN_LEASED", "RUN_STARTED")
    broker = RunEventBroker(source, poll_interval=60.0, batch_size=2)
    try:
        subscriber = broker.subscribe(WORKSPACE, RUN, after_sequence=1)
        replayed = await _drain(subscriber, 2)
        source.append("PROGRESS", "PROGRESS", "PROGRESS")
        broker.hint(RUN)
        live = await _drain(subscriber, 3)
        source.append("RUN_COMPLETED")
        broker.hint(RUN)
        last = await _drain(subscriber, 1)
        with pytest.raises(EventStreamEnded):
            await subscriber.next_event(1.0)
    finally:
        await broker.stop()
    assert replayed + live + last == [2, 3, 4, 5, 6, 7]


async def test_many_subscribers_share_one_poller() -> None:
    source = MemoryEvents()
    source.append("RUN_CREATED")
    broker = RunEventBroker(source, poll_interval=60.0)
    try:
        subscribers = [broker.subscribe(WORKSPACE, RUN, after_sequence=1) for _ in range(50)]
        for subscriber in subscribers:
            assert await subscriber.next_event(0.01) is None
        reads_before = source.reads
        source.append("PROGRESS", "PROGRESS")
        broker.hint(RUN)
        received = [await _drain(s, 2) for s in subscribers]
        polls = source.reads - reads_before
        watched = broker.watched_runs
    finally:
        await broker.stop()
    assert watched == 1
    assert all(r == [2, 3] for r in received)
    # One poller read the new events once (plus the empty read that ends its pass), not once per client.
    assert polls <= 2


async def test_a_slow_subscriber_is_dropped_and_never_slows_the_others() -> None:
    source = MemoryEvents()
    broker = RunEventBroker(source, poll_interval=60.0, queue_size=3)
    try:
        slow = broker.subscribe(WORKSPACE, RUN, after_sequence=0)
        fast = broker.subscribe(WORKSPACE, RUN, after_sequence=0)
        # Both finish their (empty) replay and go live.
        assert await slow.next_event(0.01) is None
        assert await fast.next_event(0.01) is None
        received: list[int] = []
        for _ in range(4):
            source.append("PROGRESS", "PROGRESS")
            broker.hint(RUN)
            received += await _drain(fast, 2)
        count_after_drop = broker.subscriber_count(RUN)
        with pytest.raises(EventStreamEnded) as ended:
            await slow.next_event(1.0)
    finally:
        await broker.stop()
    assert received == list(range(1, 9))
    assert count_after_drop == 1
    assert "dropped" in ended.value.reason


async def test_a_dropped_subscriber_resumes_from_its_last_event_on_reconnect() -> None:
    source = MemoryEvents()
    broker = RunEventBroker(source, poll_interval=60.0, queue_size=2)
    try:
        first = broker.subscribe(WORKSPACE, RUN, after_sequence=0)
        assert await first.next_event(0.01) is None
        source.append("RUN_CREATED")
        broker.hint(RUN)
        got = await _drain(first, 1)
        source.append("PROGRESS", "PROGRESS", "PROGRESS")
        broker.hint(RUN)
        await asyncio.sleep(0.05)
        with pytest.raises(EventStreamEnded):
            await first.next_event(1.0)
        first.close()
        again = broker.subscribe(WORKSPACE, RUN, after_sequence=first.last_sequence)
        got += await _drain(again, 3)
    finally:
        await broker.stop()
    assert got == [1, 2, 3, 4]


async def test_a_terminal_run_stream_ends_after_its_last_event() -> None:
    source = MemoryEvents()
    source.append("RUN_CREATED", "RUN_COMPLETED")
    broker = RunEventBroker(source, poll_interval=60.0)
    try:
        caught_up = broker.subscribe(WORKSPACE, RUN, after_sequence=2, end_at=2)
        with pytest.raises(EventStreamEnded):
            await caught_up.next_event(1.0)
        replay = broker.subscribe(WORKSPACE, RUN, after_sequence=0, end_at=2)
        got = await _drain(replay, 2)
        with pytest.raises(EventStreamEnded):
            await replay.next_event(1.0)
    finally:
        await broker.stop()
    assert got == [1, 2]


async def test_stopping_the_broker_ends_every_stream() -> None:
    source = MemoryEvents()
    broker = RunEventBroker(source, poll_interval=60.0)
    subscriber = broker.subscribe(WORKSPACE, RUN, after_sequence=0)
    assert await subscriber.next_event(0.01) is None
    await broker.stop()
    with pytest.raises(EventStreamEnded):
        await subscriber.next_event(1.0)
    late = broker.subscribe(WORKSPACE, RUN, after_sequence=0)
    with pytest.raises(EventStreamEnded):
        await late.next_event(1.0)
