"""A controllable clock: time moves only when a test advances it, so no test sleeps for real."""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import TypeVar

__all__ = ["ClockDeadlockError", "FakeClock", "FakeTimer"]

T = TypeVar("T")

_DEFAULT_START = datetime(2026, 1, 1, tzinfo=UTC)
# A settle pass yields to the loop until nothing else is runnable, but never more than this many times.
_MAX_SETTLE_YIELDS = 10_000
# Without access to the loop's ready queue (another loop implementation), settle by yielding this often.
_BLIND_SETTLE_YIELDS = 200
# Added to a timer's tie-breaking sequence so that, at one instant, every sleeper wakes before any timer:
# work that completes exactly at its deadline is in time.
_TIMERS_AFTER_SLEEPERS = 1 << 62


class ClockDeadlockError(RuntimeError):
    """``FakeClock.run`` found the awaited work blocked with no sleeper left to wake it."""


class FakeTimer:
    """A timer armed with ``FakeClock.call_at``."""

    __slots__ = ("_armed", "cancelled")

    def __init__(self, armed: asyncio.Future[None] | asyncio.Handle) -> None:
        self._armed = armed
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True
        self._armed.cancel()


class FakeClock:
    """An ``ExecutionClock`` whose sleepers wake only when ``advance`` (or ``run``) moves time past them.

    Sleepers wake in deadline order (ties in the order they started sleeping), and each wake-up is allowed
    to run to its next suspension before the next one, which makes timing-dependent tests deterministic.
    """

    def __init__(self, start: datetime = _DEFAULT_START) -> None:
        if start.tzinfo is None:
            raise ValueError("FakeClock needs a timezone-aware start")
        self._start = start.astimezone(UTC)
        self._elapsed = 0.0
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._counter = itertools.count()

    def now(self) -> datetime:
        return self._start + timedelta(seconds=self._elapsed)

    def monotonic(self) -> float:
        return self._elapsed

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        sequence = next(self._counter)
        if sequence % 1024 == 0:
            self._discard_cancelled()
        heapq.heappush(self._sleepers, (self._elapsed + seconds, sequence, future))
        await future

    def call_at(self, when: float, callback: Callable[[], object]) -> FakeTimer:
        """Run ``callback`` once time reaches ``when``, in deadline order with the sleepers.

        At the same instant sleepers wake first (a call that answers exactly at its deadline is in time),
        then timers in the order they were armed. ``cancel()`` on the result disarms it, even when its time has come but the callback has not run
        yet. A deadline already reached fires on the next loop step, as ``sleep(0)`` would.
        """
        loop = asyncio.get_running_loop()
        if when <= self._elapsed:
            return FakeTimer(loop.call_soon(callback))
        future: asyncio.Future[None] = loop.create_future()
        timer = FakeTimer(future)
        future.add_done_callback(lambda _: None if timer.cancelled else callback())
        sequence = next(self._counter)
        if sequence % 1024 == 0:
            self._discard_cancelled()
        heapq.heappush(self._sleepers, (when, _TIMERS_AFTER_SLEEPERS + sequence, future))
        return timer

    @property
    def pending_sleepers(self) -> int:
        self._discard_cancelled()
        return len(self._sleepers)

    @property
    def next_deadline(self) -> float | None:
        self._discard_cancelled()
        return self._sleepers[0][0] if self._sleepers else None

    async def advance(self, seconds: float) -> None:
        """Move time forward by ``seconds``, waking every sleeper due on the way, in order."""
        if seconds < 0:
            raise ValueError("time only moves forward")
        await self._settle()
        target = self._elapsed + seconds
        while True:
            self._discard_cancelled()
            if not self._sleepers or self._sleepers[0][0] > target:
                break
            deadline, _, future = heapq.heappop(self._sleepers)
            self._elapsed = max(self._elapsed, deadline)
            future.set_result(None)
            await self._settle()
        self._elapsed = target
        await self._settle()

    async def run(self, awaitable: Awaitable[T], *, max_seconds: float = 86_400.0) -> T:
        """Await ``awaitable``, jumping time to the next sleeper whenever everything else is blocked."""
        task = asyncio.ensure_future(awaitable)
        limit = self._elapsed + max_seconds
        try:
            while not task.done():
                await self._settle()
                if task.done():
                    break
                deadline = self.next_deadline
                if deadline is None:
                    raise ClockDeadlockError("the awaited work is blocked and no sleeper can wake it")
                if deadline > limit:
                    raise ClockDeadlockError(f"the awaited work did not finish within {max_seconds}s")
                await self.advance(deadline - self._elapsed)
        finally:
            if not task.done():
                task.cancel()
        return task.result()

    def _discard_cancelled(self) -> None:
        while self._sleepers and self._sleepers[0][2].done():
            heapq.heappop(self._sleepers)
        # Cancelled sleepers deep in the heap would otherwise pile up (one per finished item timer).
        if len(self._sleepers) > 64:
            live = [entry for entry in self._sleepers if not entry[2].done()]
            if len(live) * 2 < len(self._sleepers):
                heapq.heapify(live)
                self._sleepers = live

    async def _settle(self) -> None:
        """Yield until no other callback is ready to run (the loop's ready queue is empty)."""
        # asyncio's ready queue is private; reading its length is the only exact idleness signal there is.
        ready = getattr(asyncio.get_running_loop(), "_ready", None)
        if ready is None:
            for _ in range(_BLIND_SETTLE_YIELDS):
                await asyncio.sleep(0)
            return
        for _ in range(_MAX_SETTLE_YIELDS):
            await asyncio.sleep(0)
            if len(ready) == 0:
                # One more pass: a callback may have just scheduled work via call_soon.
                await asyncio.sleep(0)
                if len(ready) == 0:
                    return
