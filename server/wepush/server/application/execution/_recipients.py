"""The recipient source of a run: the frozen audience snapshot (or a resend run's retry set), in batches."""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from wepush.agent.engine import RecipientRecord
from wepush.server.domain import (
    MAX_PAGE_LIMIT,
    Page,
    PageRequest,
    Recipient,
    Run,
    RunTrigger,
    UnitOfWork,
    UnitOfWorkFactory,
)

from ._fence import LeaseGuard
from ._snapshot import RunSnapshot

if TYPE_CHECKING:
    from ._ledger import ExecutionLedger

__all__ = ["RecipientScope", "SnapshotRecipientSource", "read_recipients"]

_PACE_WINDOW = 1.0
"""Seconds of dispatch one raise of the mark covers: about one write a second, whatever the pace."""
_FIRST_CHUNK = 32
"""Records the first raise covers (and any raised before a pace is known): a just-started run starts as
many records as its concurrency at once, and must not wait for a write per record."""
_MIN_CHUNK = 1
"""Records a raise covers at least once the pace is known. A chunk is a second of sending, so even one
record a raise writes at most about once a second; a slow run (2 a second) thus counts 2 or 3 records
beyond those in flight as possibly sent after a crash, not a fixed floor's 48."""


@dataclass(frozen=True, slots=True)
class RecipientScope:
    """Which recipients a run covers: an audience snapshot, limited to the retry set for a resend run."""

    workspace_id: str
    run_id: str
    snapshot_id: str
    resend: bool

    @classmethod
    def of(cls, snapshot: RunSnapshot) -> RecipientScope:
        return cls(
            snapshot.workspace_id,
            snapshot.run_id,
            snapshot.audience.snapshot_id,
            snapshot.resend_of is not None,
        )

    @classmethod
    def of_run(cls, run: Run) -> RecipientScope:
        """From the run's indexed columns alone, for a run whose snapshot cannot be read."""
        return cls(run.workspace_id, run.id, run.audience_snapshot_id, run.trigger is RunTrigger.RESEND)


async def read_recipients(
    uow: UnitOfWork, scope: RecipientScope, after: int | None, limit: int
) -> Page[Recipient, int]:
    """One page of the run's recipients in sequence order: the whole audience snapshot, or for a resend
    run only the items of its ``run_retry_item`` set."""
    page = PageRequest(limit=max(1, min(limit, MAX_PAGE_LIMIT)), after=after)
    if scope.resend:
        return await uow.run_items.list_retry_recipients(scope.run_id, scope.snapshot_id, page)
    return await uow.audiences.list_recipients(scope.snapshot_id, page)


class SnapshotRecipientSource:
    """The engine's RecipientSource, and its DispatchFence: the run's dispatch high-water mark.

    Each batch is read read-only, which in WAL mode (and on PostgreSQL) never waits for the writers
    recording results, so the engine's read-ahead is not held up by them.

    After a crash, recovery takes a recipient without an outcome for possibly sent (UNKNOWN) at or below
    the mark and for UNSENT above it. So the mark is raised as the engine dispatches, not as it reads: the
    engine asks ``covers`` right before it hands a record to a provider and awaits ``cover`` when the
    answer is no, and ``covers`` answers yes only once a mark at or above the record is stored. A recovery
    therefore never takes an item that may have been sent for UNSENT. To spare dispatch a database write
    per record, the mark is raised in chunks of about a second of the run's recent dispatch pace (32
    records for the first, when no pace is known yet; at most a read batch, never beyond the last record
    read), and the next chunk is
    raised in the background as soon as dispatch passes the middle of the current one: dispatch waits
    for a write only at the start, after a pause or when sending outruns the database. After a crash only
    the items in flight and at most about one and a half chunks beyond them count as possibly sent. A
    paused run starts no record and so never raises the mark; records read ahead do not raise it either.

    Every raise proves the lease fence in its own transaction (a stale executor may still read, but can
    hand nothing to a provider); through a database outage it is tried again for as long as the lease
    may still be ours (``LeaseGuard.retrying``), and meanwhile no record beyond the mark starts: nothing
    is sent that could not be put on record. A raise that fails in the end is not lost: it fails the
    ``cover`` of the first record that needs it, which then is not sent and the run stops.
    """

    def __init__(
        self,
        uow: UnitOfWorkFactory,
        guard: LeaseGuard,
        snapshot: RunSnapshot,
        ledger: ExecutionLedger,
        *,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        """``monotonic`` times the dispatch pace (the engine's clock in tests)."""
        self._uow = uow
        self._guard = guard
        self._snapshot = snapshot
        self._ledger = ledger
        self._monotonic = monotonic
        self._scope = RecipientScope.of(snapshot)
        self._after: int | None = None
        self._exhausted = False
        self._last_read = 0
        """The mark never passes the last sequence read: nothing beyond it can have been dispatched."""
        self._batch = 1
        """Records per read, the largest chunk."""
        self._density = 1.0
        """Records per sequence in the last read: 1 in a snapshot, less in a resend run's retry set."""
        self._marked = 0
        """The highest mark known to be stored."""
        self._planned = 0
        """The highest mark stored or being stored."""
        self._ahead_at = 0
        """Starting a record at or past this sequence raises the next chunk in the background."""
        self._raising: asyncio.Task[None] | None = None
        self._paced: tuple[float, int] | None = None
        """(when, sequence) of the last raise, to measure the dispatch pace by."""

    async def open(self) -> None:
        async def read() -> None:
            async with self._uow(read_only=True) as uow:
                await uow.audiences.get_snapshot(
                    self._snapshot.workspace_id, self._snapshot.audience.snapshot_id
                )

        # A source that cannot be opened fails the run before it starts: not for a database blip.
        await self._guard.retrying(read)

    async def next_batch(self, max_items: int) -> Sequence[RecipientRecord]:
        if self._exhausted:
            return ()
        ledger, after = self._ledger, self._after
        page = await self._guard.retrying(lambda: ledger.read_records(self._scope, after, max_items))
        if not page.items:
            self._exhausted = True
            return ()
        records = page.items
        last = records[-1].sequence
        start = records[0].sequence - 1 if after is None else after
        self._density = len(records) / (last - start)
        self._batch = max(1, max_items)
        self._after = self._last_read = last
        self._exhausted = not page.has_more
        return records

    def covers(self, sequence: int) -> bool:
        if sequence >= self._ahead_at:
            self._raise_ahead(sequence)
        return sequence <= self._marked

    async def cover(self, sequence: int) -> None:
        while sequence > self._marked:
            raising = self._raising
            if raising is None or (raising.done() and not _failed(raising)):
                raising = self._raise(sequence)
            # Shielded: a waiter that is cancelled must not cancel a write other records wait for. A
            # failed raise stays failed, so it fails every record that needs it.
            await asyncio.shield(raising)

    def _raise_ahead(self, sequence: int) -> None:
        """Raise the next chunk in the background, unless a raise is under way (or failed: it surfaces in
        ``cover``) or nothing beyond the mark has been read yet (the next ``covers`` tries again)."""
        raising = self._raising
        if raising is not None and (not raising.done() or _failed(raising)):
            return
        if self._planned < self._last_read:
            self._raise(sequence)

    def _raise(self, sequence: int) -> asyncio.Task[None]:
        """Start raising the mark through ``sequence`` and the chunk that follows the mark or it."""
        base = max(self._planned, sequence - 1)
        target = max(sequence, min(self._last_read, base + self._chunk(sequence)))
        self._planned = target
        self._ahead_at = base + (target - base + 1) // 2
        self._raising = task = asyncio.create_task(self._mark(target))
        task.add_done_callback(_retrieve)
        return task

    def _chunk(self, sequence: int) -> int:
        """Sequences one raise covers: about a second of the dispatch pace since the last raise, within
        the floor and a read batch (converted from records to sequences by the density of the set)."""
        now = self._monotonic()
        paced, self._paced = self._paced, (now, sequence)
        cap = math.ceil(self._batch / self._density)
        if paced is None:
            return math.ceil(min(_FIRST_CHUNK, self._batch) / self._density)
        floor = math.ceil(min(_MIN_CHUNK, self._batch) / self._density)
        elapsed = now - paced[0]
        if elapsed <= 0:
            return cap
        return max(floor, min(cap, round((sequence - paced[1]) / elapsed * _PACE_WINDOW)))

    async def _mark(self, through: int) -> None:
        snapshot, guard = self._snapshot, self._guard
        await guard.retrying(
            lambda: self._ledger.mark_dispatched(
                guard.fence, guard.now(), snapshot.workspace_id, snapshot.run_id, through
            )
        )
        self._marked = max(self._marked, through)

    async def close(self) -> None:
        raising, self._raising = self._raising, None
        if raising is not None:
            # Only ever raised for records that have not started yet: a failure here loses nothing.
            with contextlib.suppress(Exception):
                await raising


def _failed(task: asyncio.Task[None]) -> bool:
    return task.cancelled() or task.exception() is not None


def _retrieve(task: asyncio.Task[None]) -> None:
    # A failed raise is awaited (and raised) by the record that needs it, or dropped unneeded.
    if not task.cancelled():
        task.exception()
