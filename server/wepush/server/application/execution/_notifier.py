"""An in-process wake-up hint: "a run became available" or "a command was stored".

The hint only shortens latency. Every listener also wakes on its own interval and scans the database, so
a lost or early hint never loses work. Call :meth:`RunAvailabilityNotifier.notify` after the transaction
that created the run or stored the command has committed, from the event loop's thread.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator

__all__ = ["HintListener", "RunAvailabilityNotifier"]


class HintListener:
    """One consumer's view of the hint; a hint sent while the consumer was busy is not lost."""

    def __init__(self, notifier: RunAvailabilityNotifier) -> None:
        self._notifier = notifier
        self._event = asyncio.Event()

    def wake(self) -> None:
        self._event.set()

    async def wait(self, timeout: float) -> bool:  # noqa: ASYNC109 - a poll interval, not a deadline
        """Return ``True`` when hinted, ``False`` when ``timeout`` seconds passed first."""
        try:
            # Not ``wait_for``: on Python 3.11 it loses a cancellation that arrives as the hint does, and
            # a loop waiting here then never stops (its task stays "cancelling" for good).
            async with asyncio.timeout(timeout):
                await self._event.wait()
        except TimeoutError:
            # Not cleared: a hint that lands right now is still seen by the next wait.
            return False
        self._event.clear()
        return True

    def close(self) -> None:
        self._notifier._listeners.discard(self)


class RunAvailabilityNotifier:
    """Fan-out of the hint to every listener (the claimer and the command poller listen)."""

    def __init__(self) -> None:
        self._listeners: set[HintListener] = set()

    def notify(self) -> None:
        for listener in tuple(self._listeners):
            listener.wake()

    def listen(self) -> HintListener:
        listener = HintListener(self)
        self._listeners.add(listener)
        return listener

    @contextlib.contextmanager
    def listening(self) -> Iterator[HintListener]:
        listener = self.listen()
        try:
            yield listener
        finally:
            listener.close()
