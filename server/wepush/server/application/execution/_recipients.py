"""The recipient source of a run: the frozen audience snapshot (or a resend run's retry set), in batches."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
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

from ._fence import LeaseGuard, retrying
from ._snapshot import RunSnapshot

if TYPE_CHECKING:
    from ._ledger import ExecutionLedger

__all__ = ["RecipientScope", "SnapshotRecipientSource", "read_recipients"]


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
    """The engine's RecipientSource.

    Each batch is read read-only, which in WAL mode (and on PostgreSQL) never waits for the writers
    recording results, so the engine's read-ahead is not held up by them.

    The run's dispatch high-water mark is always at or above the last sequence of every batch returned
    (the engine may hand a record to a provider as soon as it has it), so a recovery never takes an item
    that may have been sent for UNSENT. A batch is returned only once its mark is stored; so that this
    rarely means waiting for a writer, the mark is raised one batch further in the background as each
    batch is returned: the next batch normally finds its mark stored already. The price is precision
    after a crash: up to one batch beyond what was read counts as possibly sent (UNKNOWN).
    """

    def __init__(
        self,
        uow: UnitOfWorkFactory,
        guard: LeaseGuard,
        snapshot: RunSnapshot,
        ledger: ExecutionLedger,
    ) -> None:
        self._uow = uow
        self._guard = guard
        self._snapshot = snapshot
        self._ledger = ledger
        self._scope = RecipientScope.of(snapshot)
        self._after: int | None = None
        self._exhausted = False
        self._marked = 0
        """The highest mark known to be stored."""
        self._marking: asyncio.Task[None] | None = None
        self._marking_to = 0

    async def open(self) -> None:
        async with self._uow(read_only=True) as uow:
            await uow.audiences.get_snapshot(self._snapshot.workspace_id, self._snapshot.audience.snapshot_id)

    async def next_batch(self, max_items: int) -> Sequence[RecipientRecord]:
        if self._exhausted:
            return ()
        ledger, after = self._ledger, self._after
        page = await retrying(lambda: ledger.read_records(self._scope, after, max_items))
        if not page.items:
            self._exhausted = True
            return ()
        records = page.items
        last = records[-1].sequence
        if self._marked < last:
            marking = self._marking
            if marking is not None and self._marking_to >= last:
                # Raised ahead while the previous batch was dispatched; a failure surfaces here.
                await marking
            if self._marked < last:
                await self._mark(last)
        self._after = last
        self._exhausted = not page.has_more
        ahead = last + max_items
        if not self._scope.resend:
            # Sequences are dense 1..n in a snapshot: the mark never needs to pass its last recipient.
            ahead = max(last, min(ahead, self._snapshot.audience.recipient_count))
        if not self._exhausted and ahead > self._marked and (self._marking is None or self._marking.done()):
            self._marking_to = ahead
            self._marking = asyncio.create_task(self._mark(ahead))
            self._marking.add_done_callback(_retrieve)
        return records

    async def _mark(self, through: int) -> None:
        snapshot, guard = self._snapshot, self._guard
        await retrying(
            lambda: self._ledger.mark_dispatched(
                guard.fence, guard.now(), snapshot.workspace_id, snapshot.run_id, through
            )
        )
        self._marked = max(self._marked, through)

    async def close(self) -> None:
        marking, self._marking = self._marking, None
        if marking is not None:
            # Only ever raised beyond what was handed out: a failure here loses nothing.
            with contextlib.suppress(Exception):
                await marking


def _retrieve(task: asyncio.Task[None]) -> None:
    # A failed mark ahead is awaited (and raised) by the batch that needs it, or dropped unneeded.
    if not task.cancelled():
        task.exception()
