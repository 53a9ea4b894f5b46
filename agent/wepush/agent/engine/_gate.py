"""ConcurrencyGate: a resizable permit pool bounding real in-flight provider calls."""

from __future__ import annotations

import asyncio
from collections import deque

__all__ = ["ConcurrencyGate"]


class ConcurrencyGate:
    """Permits are granted FIFO. Growing the limit grants waiting permits at once; shrinking never
    interrupts holders, it just withholds new permits until enough have been released. ``close`` makes
    every current and future ``acquire`` return ``False`` so a stopping run never waits for a permit.

    ``keep`` lets a worker that finished an item carry its permit straight over to the next one. That is
    the same as releasing and re-acquiring in one step, so it is allowed only when the release would not
    have handed the permit to a waiting retry: either nobody waits, or the first waiter is the run's own
    dispatcher, which would only have used the permit to start that very next item.
    """

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError("the concurrency limit must be at least 1")
        self._limit = limit
        self._in_use = 0
        self._peak = 0
        # (future, is_dispatcher) in arrival order.
        self._waiters: deque[tuple[asyncio.Future[bool], bool]] = deque()
        self._closed = False

    @property
    def limit(self) -> int:
        return self._limit

    @property
    def in_use(self) -> int:
        return self._in_use

    @property
    def peak(self) -> int:
        return self._peak

    @property
    def closed(self) -> bool:
        return self._closed

    def try_acquire(self) -> bool:
        if self._closed or self._in_use >= self._limit or self._waiters:
            return False
        self._take()
        return True

    def keep(self) -> bool:
        """Whether a holder may keep its permit for another item instead of releasing it."""
        if self._closed or self._in_use > self._limit:
            return False
        waiters = self._waiters
        while waiters and waiters[0][0].done():
            waiters.popleft()
        return not waiters or waiters[0][1]

    async def acquire(self, *, dispatcher: bool = False) -> bool:
        """Wait for a permit; ``False`` means the gate was closed and no permit is held.

        ``dispatcher`` marks the run's dispatcher, which only starts new items (see ``keep``).
        """
        if self.try_acquire():
            return True
        if self._closed:
            return False
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._waiters.append((future, dispatcher))
        try:
            return await future
        except asyncio.CancelledError:
            # A permit handed over just before cancellation must go back to the pool.
            if future.done() and not future.cancelled() and future.result():
                self.release()
            raise

    def close(self) -> None:
        self._closed = True
        while self._waiters:
            future, _ = self._waiters.popleft()
            if not future.done():
                future.set_result(False)

    def release(self) -> None:
        if self._in_use <= 0:
            raise RuntimeError("release without acquire")
        self._in_use -= 1
        self._grant()

    def resize(self, limit: int) -> None:
        if limit < 1:
            raise ValueError("the concurrency limit must be at least 1")
        self._limit = limit
        self._grant()

    def _take(self) -> None:
        self._in_use += 1
        self._peak = max(self._peak, self._in_use)

    def _grant(self) -> None:
        while self._waiters and self._in_use < self._limit:
            future, _ = self._waiters.popleft()
            if future.done():
                continue
            self._take()
            future.set_result(True)
