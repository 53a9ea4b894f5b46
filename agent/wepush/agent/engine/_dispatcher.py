"""EventDispatcher: a bounded, coalescing buffer between the run and its RunEventSink."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ._enums import RunEventType
from ._events import RunEvent
from ._options import EngineOptions
from ._ports import ExecutionClock, RunEventSink
from ._results import ExecutionError

__all__ = ["EventDispatcher"]


@dataclass(slots=True)
class _Pending:
    type: RunEventType
    occurred_at: datetime
    data: Mapping[str, Any]


class EventDispatcher:
    """Sequences are assigned when a batch is first handed to the sink, so coalescing progress events
    never leaves gaps. At most one progress event waits unpublished (a newer one replaces it); state,
    command, error and terminal events are never dropped. A failed publish is retried with the very same
    events and sequences."""

    def __init__(
        self, run_id: str, sink: RunEventSink, clock: ExecutionClock, options: EngineOptions
    ) -> None:
        self._run_id = run_id
        self._sink = sink
        self._clock = clock
        self._options = options
        self._buffer: deque[_Pending] = deque()
        self._batch: list[RunEvent] = []
        self._sequence = 0
        self._wake = asyncio.Event()
        self.published: int = 0
        self.coalesced: int = 0

    @property
    def last_sequence(self) -> int:
        return self._sequence

    def emit(self, event_type: RunEventType, data: Mapping[str, Any], *, force: bool = False) -> bool:
        """Queue an event; ``force`` keeps a progress event even over the bound (the final counts).

        ``False`` when the event was dropped (a progress event over the bound): the caller must not take
        it for sent."""
        pending = _Pending(event_type, self._clock.now(), data)
        if event_type.droppable:
            for index, queued in enumerate(self._buffer):
                if queued.type is event_type:
                    del self._buffer[index]
                    self.coalesced += 1
                    break
            else:
                if not force and len(self._buffer) >= self._options.event_buffer_size:
                    # Over the bound a progress update is the one thing that may go: a newer one follows.
                    self.coalesced += 1
                    return False
        self._buffer.append(pending)
        self._wake.set()
        return True

    async def run(self) -> None:
        """Background publisher; retries forever with backoff until cancelled before ``drain``."""
        failures = 0
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._batch or self._buffer:
                try:
                    await self._publish_once()
                    failures = 0
                except Exception:
                    failures += 1
                    await self._clock.sleep(self._options.sink_retry_delay(failures))

    async def drain(self) -> list[ExecutionError]:
        """Publish what is left and flush the sink, with a bounded number of attempts."""
        errors: list[ExecutionError] = []
        failures = 0
        while self._batch or self._buffer:
            try:
                await self._publish_once()
                failures = 0
            except Exception as exc:
                failures += 1
                if failures >= self._options.sink_retry_attempts:
                    errors.append(ExecutionError.from_exception("events.publish", "EVENT_SINK_FAILED", exc))
                    return errors
                await self._clock.sleep(self._options.sink_retry_delay(failures))
        failures = 0
        while True:
            try:
                await self._sink.flush()
                return errors
            except Exception as exc:
                failures += 1
                if failures >= self._options.sink_retry_attempts:
                    errors.append(ExecutionError.from_exception("events.flush", "EVENT_SINK_FAILED", exc))
                    return errors
                await self._clock.sleep(self._options.sink_retry_delay(failures))

    async def _publish_once(self) -> None:
        if not self._batch:
            while self._buffer:
                pending = self._buffer.popleft()
                self._sequence += 1
                self._batch.append(
                    RunEvent(self._run_id, self._sequence, pending.type, pending.occurred_at, pending.data)
                )
        await self._sink.publish(tuple(self._batch))
        self.published += len(self._batch)
        self._batch = []
