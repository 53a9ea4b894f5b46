"""ItemWorkers: the tasks that take recipients off the read-ahead queue and run them under the gate."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any

from ._batcher import ResultBatcher
from ._control import RunControl
from ._items import UNSENT, ItemOutcome
from ._ports import DispatchFence
from ._recipients import RecipientRecord
from ._tally import Tally

__all__ = ["ItemWorkers"]

# A worker whose provider answers without ever suspending would otherwise keep the loop to itself; this
# often it lets timers, commands and the sinks' background tasks run.
_YIELD_EVERY = 32


class ItemWorkers:
    """One task at a time is the *dispatcher*. It waits, in this order, until the queue holds a record,
    the run is not paused, the result backlog has room and the gate grants a permit; then it takes the
    head of the queue, hands the dispatcher role to a new task and runs that item itself as a *worker*.

    Recipients are read one batch ahead by a *reader* task: as soon as no more than ``low_water`` read
    records wait in the queue (and the result backlog has room), the next batch is read while the queued
    ones are dispatched, so dispatch only waits for the source when the source is slower than sending.
    At most one read is outstanding; ``dispatched`` waits for it, so a batch read while the run stopped is
    still in ``queue`` for the caller to account for.

    A worker whose item has ended carries its permit straight on to the next record when a dispatcher
    would have started that record at this moment anyway: the run is neither stopping nor paused, the
    backlog has room and no retry is waiting for the permit (``ConcurrencyGate.keep``). Otherwise it
    releases the permit and ends. Items therefore start in sequence order under the same conditions as
    with a task per item, but the steady state creates no task and schedules no callback per item. There
    are never more tasks than items holding a permit or backing off, plus the dispatcher.

    With a ``DispatchFence``, a worker asks it about each record it is about to start, after taking it
    (so in sequence order) and before ``execute``: records read ahead are not asked about until they
    start. When the fence does not cover the record yet, the worker waits for ``cover`` with its permit
    held; when covering fails, the record is finalised UNSENT and ``on_fence_error`` stops the run.
    """

    def __init__(
        self,
        *,
        control: RunControl,
        batcher: ResultBatcher,
        tally: Tally,
        read: Callable[[], Awaitable[Sequence[RecipientRecord] | None]],
        execute: Callable[[RecipientRecord, asyncio.Task[Any]], Awaitable[tuple[ItemOutcome, bool]]],
        crashed: Callable[[Exception], ItemOutcome],
        finish: Callable[[RecipientRecord, ItemOutcome], None],
        skip: Callable[[RecipientRecord], None] | None,
        on_error: Callable[[Exception], None],
        low_water: int = 0,
        fence: DispatchFence | None = None,
        on_fence_error: Callable[[Exception], None] | None = None,
    ) -> None:
        """``execute`` runs a started item (see ``ItemExecutor.execute``), ``crashed`` turns an exception
        it raised into an outcome, ``finish`` records the outcome of an item no longer in flight; ``skip``
        finalises a record that is not sent at all (a simulated dry run) and ``on_error`` stops the run
        when dispatching breaks. ``on_fence_error`` (default ``on_error``) is told, once, that ``fence``
        could not cover a record."""
        self._control = control
        self._gate = control.gate
        self._stop = control.stop
        self._open = control.dispatch_open
        self._batcher = batcher
        self._tally = tally
        self._read = read
        self._execute = execute
        self._crashed = crashed
        self._finish = finish
        self._skip = skip
        self._on_error = on_error
        self._low_water = low_water
        self._fence = fence
        self._on_fence_error = on_fence_error or on_error
        self._fence_failed = False
        self.queue: deque[RecipientRecord] = deque()
        self.exhausted = False
        self.failed = False
        self._over = asyncio.Event()
        self._tasks: set[asyncio.Task[None]] = set()
        self._reader: asyncio.Task[None] | None = None
        self._read_over = False
        self._arrived = asyncio.Event()
        self.reads = 0

    def start(self) -> None:
        self._spawn(self._dispatch())

    async def dispatched(self) -> None:
        """Return once no further item will start: the audience is exhausted or the run is stopping.

        Records still in ``queue`` then were read but never started (a read still outstanding is awaited
        first, so its records are among them).
        """
        await self._over.wait()
        while self._reader is not None:
            await asyncio.wait([self._reader])

    async def join(self) -> None:
        """Wait until every started item has been finalised."""
        while self._tasks:
            await asyncio.gather(*tuple(self._tasks), return_exceptions=True)

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _dispatch(self) -> None:
        """A task's life: dispatcher until it starts an item, then a worker until it cannot carry on."""
        try:
            record = await self._next_record()
        except Exception as exc:
            self.failed = True
            self._on_error(exc)
            record = None
        if record is None:
            self._over.set()
            return
        self._spawn(self._dispatch())
        execute, finish, tally, fence = self._execute, self._finish, self._tally, self._fence
        control, gate, batcher, queue = self._control, self._gate, self._batcher, self.queue
        task = asyncio.current_task()
        assert task is not None
        streak = 0
        try:
            while True:
                if (
                    fence is not None
                    and not fence.covers(record.sequence)
                    and not await self._cover(fence, record)
                ):
                    # Not on record as possibly sent, so it must not reach the provider.
                    tally.in_flight -= 1
                    finish(record, UNSENT)
                    gate.release()
                    return
                try:
                    outcome, holding = await execute(record, task)
                except Exception as exc:
                    outcome, holding = self._crashed(exc), False
                tally.in_flight -= 1
                finish(record, outcome)
                if not holding:
                    return
                # Carry the permit on to the next record when a dispatcher would start it right now.
                if not (queue and control.dispatching and batcher.has_capacity() and gate.keep()):
                    gate.release()
                    return
                tally.pending -= 1
                tally.in_flight += 1
                record = queue.popleft()
                if len(queue) <= self._low_water:
                    self._read_ahead()
                streak += 1
                if streak == _YIELD_EVERY:
                    streak = 0
                    await asyncio.sleep(0)
        except Exception as exc:
            self._on_error(exc)

    async def _cover(self, fence: DispatchFence, record: RecipientRecord) -> bool:
        """Wait until ``fence`` covers ``record``; ``False`` when it cannot (the run is then stopping)."""
        try:
            await fence.cover(record.sequence)
        except Exception as exc:
            # Every worker waiting for the same failed write sees it fail: report it once.
            if not self._fence_failed:
                self._fence_failed = True
                self._on_fence_error(exc)
            return False
        return True

    async def _next_record(self) -> RecipientRecord | None:
        """The next record to start, with its permit held; ``None`` when dispatching is over."""
        queue, gate, batcher = self.queue, self._gate, self._batcher
        while not self._stop.is_set():
            if len(queue) <= self._low_water:
                self._read_ahead()
            if not queue:
                if self._reader is None:
                    # Exhausted, or the read failed (which stops the run).
                    return None
                self._arrived.clear()
                await self._arrived.wait()
                continue
            if not self._open.is_set():
                await self._open.wait()
                continue
            if not batcher.has_capacity():
                await batcher.wait_capacity()
                continue
            if self._skip is not None:
                self._tally.pending -= 1
                self._skip(queue.popleft())
                continue
            if not gate.try_acquire() and not await gate.acquire(dispatcher=True):
                return None
            if not self._open.is_set() or not queue or self._stop.is_set():
                # Paused or stopped while waiting for the permit, or workers carried on with the last
                # records: hand the permit back and look again.
                gate.release()
                continue
            return self._take()
        return None

    def _read_ahead(self) -> None:
        """Start reading the next batch unless one is being read, the source is done or the run stops."""
        if self._reader is None and not self._read_over and not self._stop.is_set():
            self._reader = asyncio.create_task(self._read_batch())

    async def _read_batch(self) -> None:
        try:
            # Backpressure: read only when the result backlog is below its high-water mark.
            await self._batcher.wait_capacity()
            self.reads += 1
            batch = await self._read()
            if batch is None:
                self._read_over = True  # the source failed; the run is stopping
            elif not batch:
                self._read_over = self.exhausted = True
            else:
                tally = self._tally
                tally.total += len(batch)
                tally.pending += len(batch)
                self.queue.extend(batch)
        except Exception as exc:
            self._read_over = self.failed = True
            self._on_error(exc)
        finally:
            self._reader = None
            self._arrived.set()

    def _take(self) -> RecipientRecord:
        tally = self._tally
        tally.pending -= 1
        tally.in_flight += 1
        record = self.queue.popleft()
        if len(self.queue) <= self._low_water:
            self._read_ahead()
        return record
