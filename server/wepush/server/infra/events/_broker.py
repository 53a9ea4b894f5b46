"""The SSE broker: one shared poller per watched run fans new events out to every subscriber.

However many clients watch a run, the database sees one ``SELECT … WHERE run_id = ? AND sequence > ?``
per tick for it (plus each client's one-off replay when it connects). The poller sleeps for
``poll_interval`` unless :meth:`RunEventBroker.hint` wakes it early — the executor calls it after it
stored events, and the command use cases after they committed theirs. Hints are an in-process
optimisation only: another Service instance's events are found by the next tick.

Publishing never waits for a subscriber: a subscriber whose bounded queue is full is dropped and its
stream ends; the client reconnects with Last-Event-ID. So a slow or stuck client can cost itself a
reconnect, never the run or the other clients any latency.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from wepush.server.application.background import PassFailures
from wepush.server.domain import RunEvent

from ._source import RunEventSource
from ._subscriber import RUN_COMPLETED, RunEventSubscriber

_log = logging.getLogger("wepush.server.events")

DEFAULT_POLL_INTERVAL = 1.0
DEFAULT_QUEUE_SIZE = 1024
DEFAULT_BATCH_SIZE = 500


class _RunPoller:
    """Owns the one polling task of one run while it has subscribers."""

    def __init__(self, broker: RunEventBroker, workspace_id: str, run_id: str) -> None:
        self.broker = broker
        self.workspace_id = workspace_id
        self.run_id = run_id
        self.subscribers: set[RunEventSubscriber] = set()
        self.wake = asyncio.Event()
        self.finished = False
        self.task: asyncio.Task[None] = asyncio.get_running_loop().create_task(
            self._run(), name=f"run-events-{run_id}"
        )

    def publish(self, events: list[RunEvent]) -> None:
        for event in events:
            for subscriber in list(self.subscribers):
                if not subscriber.offer(event):
                    self.subscribers.discard(subscriber)
                    if subscriber.ended and subscriber.ended.startswith("dropped"):
                        _log.info(
                            "dropped a slow event subscriber of run %s",
                            self.run_id,
                            extra={"event": "EVENT_SUBSCRIBER_DROPPED"},
                        )

    async def _run(self) -> None:
        broker = self.broker
        try:
            cursor = await self._head()
            while self.subscribers and not self.finished:
                # asyncio.timeout, not wait_for: on 3.11 wait_for can lose the cancellation of stop().
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(broker.poll_interval):
                        await self.wake.wait()
                self.wake.clear()
                if not self.subscribers:
                    break
                # A failed read is retried at the next tick; subscribers keep their position.
                with broker._poll_failures.attempt(self.key):
                    cursor = await self._pump(cursor)
        finally:
            self.finished = True
            broker._forget(self)

    @property
    def key(self) -> str:
        return f"run {self.run_id}"

    async def _head(self) -> int:
        while True:
            with self.broker._head_failures.attempt(self.key):
                return await self.broker.source.head(self.workspace_id, self.run_id)
            await asyncio.sleep(self.broker.poll_interval)

    async def _pump(self, cursor: int) -> int:
        """Read and publish everything committed after ``cursor``; returns the new cursor."""
        batch = self.broker.batch_size
        while True:
            events = await self.broker.source.events_after(self.run_id, cursor, batch)
            if not events:
                return cursor
            self.publish(events)
            cursor = events[-1].sequence
            if any(event.type == RUN_COMPLETED for event in events):
                # Nothing follows the terminal event: stop polling once it is handed out.
                self.finished = True
                return cursor
            if len(events) < batch:
                return cursor


class RunEventBroker:
    """Implements the application's ``RunEventFeed``. Owned by the Service runtime: :meth:`stop` ends
    every stream and awaits every poller."""

    def __init__(
        self,
        source: RunEventSource,
        *,
        poll_interval: float = DEFAULT_POLL_INTERVAL,
        queue_size: int = DEFAULT_QUEUE_SIZE,
        batch_size: int = DEFAULT_BATCH_SIZE,
    ) -> None:
        if poll_interval <= 0:
            raise ValueError("the poll interval must be positive")
        self.source = source
        self.poll_interval = poll_interval
        self.queue_size = queue_size
        self.batch_size = batch_size
        self._pollers: dict[str, _RunPoller] = {}
        self._stopped = False
        # Shared by the pollers: an outage fails every watched run's reads, and is told once.
        self._poll_failures = PassFailures(_log, "event poller", event="EVENT_POLL_FAILED")
        self._head_failures = PassFailures(_log, "event head read", event="EVENT_HEAD_READ_FAILED")

    def subscribe(
        self, workspace_id: str, run_id: str, *, after_sequence: int, end_at: int | None = None
    ) -> RunEventSubscriber:
        subscriber = RunEventSubscriber(
            self.source,
            run_id,
            after_sequence=after_sequence,
            end_at=end_at,
            queue_size=self.queue_size,
            batch_size=self.batch_size,
            on_close=self._unsubscribe,
        )
        if self._stopped:
            subscriber.end("the Service is stopping")
            return subscriber
        poller = self._pollers.get(run_id)
        if poller is None or poller.finished:
            poller = _RunPoller(self, workspace_id, run_id)
            self._pollers[run_id] = poller
        poller.subscribers.add(subscriber)
        return subscriber

    def hint(self, run_id: str) -> None:
        poller = self._pollers.get(run_id)
        if poller is not None:
            poller.wake.set()

    def subscriber_count(self, run_id: str) -> int:
        poller = self._pollers.get(run_id)
        return 0 if poller is None else len(poller.subscribers)

    @property
    def watched_runs(self) -> int:
        """Runs with a live poller (one each, however many subscribers)."""
        return len(self._pollers)

    async def stop(self) -> None:
        """End every stream and await the pollers; idempotent."""
        self._stopped = True
        pollers = list(self._pollers.values())
        for poller in pollers:
            for subscriber in list(poller.subscribers):
                subscriber.end("the Service is stopping")
            poller.subscribers.clear()
            poller.task.cancel()
        await asyncio.gather(*(poller.task for poller in pollers), return_exceptions=True)
        self._pollers.clear()

    def _unsubscribe(self, subscriber: RunEventSubscriber) -> None:
        poller = self._pollers.get(subscriber.run_id)
        if poller is not None and subscriber in poller.subscribers:
            poller.subscribers.discard(subscriber)
            if not poller.subscribers:
                poller.wake.set()

    def _forget(self, poller: _RunPoller) -> None:
        if self._pollers.get(poller.run_id) is poller:
            del self._pollers[poller.run_id]
            self._poll_failures.forget(poller.key)
            self._head_failures.forget(poller.key)
