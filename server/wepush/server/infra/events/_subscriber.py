"""One SSE client's subscription: replay from the database, then live events from the shared poller."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable

from wepush.server.application._run_ports import EventStreamEnded
from wepush.server.domain import RunEvent

from ._source import RunEventSource

RUN_COMPLETED = "RUN_COMPLETED"


class RunEventSubscriber:
    """Delivers a run's events after a position in sequence order, without gaps or duplicates.

    It starts in *catch-up* mode, reading the stored history from the database page by page. Meanwhile
    the shared poller already offers it live events into a bounded queue; once the history is exhausted
    the queue is drained, skipping what the history already delivered. A live event that would leave a
    gap (sequence above ``last + 1``) switches back to catch-up, so correctness never depends on the
    timing between the two.

    The poller never waits for a subscriber: :meth:`offer` on a full queue drops the subscriber, whose
    stream then ends (the client reconnects with Last-Event-ID and replays from the database).
    """

    def __init__(
        self,
        source: RunEventSource,
        run_id: str,
        *,
        after_sequence: int,
        end_at: int | None,
        queue_size: int,
        batch_size: int,
        on_close: Callable[[RunEventSubscriber], None],
    ) -> None:
        if queue_size < 1 or batch_size < 1:
            raise ValueError("queue and batch sizes must be positive")
        self.run_id = run_id
        self._source = source
        self._last = after_sequence
        self._end_at = end_at
        self._queue_size = queue_size
        self._batch_size = batch_size
        self._on_close = on_close
        self._history: deque[RunEvent] = deque()
        self._live: deque[RunEvent] = deque()
        self._catching_up = True
        self._gap_probe = 0
        self._ready = asyncio.Event()
        self._ended: str | None = None
        self._closed = False

    @property
    def last_sequence(self) -> int:
        return self._last

    @property
    def ended(self) -> str | None:
        """Why the stream ended, or ``None`` while it is open."""
        return self._ended

    def offer(self, event: RunEvent) -> bool:
        """Queue a live event without ever blocking; ``False`` when this subscriber is gone (ended,
        or dropped just now because its queue was full)."""
        if self._ended is not None:
            return False
        if len(self._live) >= self._queue_size:
            self.end("dropped: the subscriber fell behind")
            return False
        self._live.append(event)
        self._ready.set()
        return True

    def end(self, reason: str) -> None:
        if self._ended is None:
            self._ended = reason
            self._live.clear()
            self._history.clear()
        self._ready.set()

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self.end("closed")
            self._on_close(self)

    async def next_event(self, idle_seconds: float) -> RunEvent | None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + idle_seconds
        while True:
            if self._ended is not None:
                raise EventStreamEnded(self._ended)
            event = await self._take()
            if event is not None:
                self._last = event.sequence
                if event.type == RUN_COMPLETED or (self._end_at is not None and self._last >= self._end_at):
                    self._ended = "completed"
                return event
            if self._end_at is not None and self._last >= self._end_at:
                self._ended = "completed"
            if self._ended is not None:
                continue
            remaining = deadline - loop.time()
            if remaining <= 0:
                return None
            # No await since the last look at the queues: an offer cannot slip in between.
            self._ready.clear()
            try:
                # asyncio.timeout, not wait_for: on 3.11 wait_for can lose a cancellation (a closed stream).
                async with asyncio.timeout(remaining):
                    await self._ready.wait()
            except TimeoutError:
                return None

    async def _take(self) -> RunEvent | None:
        """The next event after ``last``, or ``None`` when none is available right now."""
        while True:
            while self._history:
                event = self._history.popleft()
                if event.sequence > self._last:
                    return event
            if self._catching_up:
                page = await self._source.events_after(self.run_id, self._last, self._batch_size)
                if self._ended is not None:
                    return None
                if page:
                    self._history.extend(page)
                    continue
                self._catching_up = False
            while self._live:
                event = self._live[0]
                if event.sequence <= self._last:
                    self._live.popleft()
                    continue
                if event.sequence > self._last + 1 and self._gap_probe != event.sequence:
                    # Something between was committed but not offered to us: read it from the
                    # database once; if it is not there (purged), accept the gap.
                    self._gap_probe = event.sequence
                    self._catching_up = True
                    break
                return self._live.popleft()
            else:
                return None
