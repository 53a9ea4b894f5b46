"""``ExecutionLedger``: the three statements an executing run repeats all the time, each one short
transaction of its own: read the next page of recipient records, raise the dispatch high-water mark,
record a batch of item results. The two writes prove the lease fence in the same transaction. The ledger
speaks the engine's types (records in, results out), so an adapter can go from rows to them directly.

``UnitOfWorkLedger`` spells them with the repositories and is the reference. An adapter for a particular
database may run each one in fewer round trips (see ``wepush.server.infra.db.SqliteExecutionLedger``),
which matters on a busy event loop: every round trip waits for the loop's next turn, and on SQLite a
write transaction keeps the single write lock for all the turns it spans.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from wepush.agent.engine import ItemResult as EngineItemResult
from wepush.agent.engine import RecipientRecord
from wepush.server.domain import LeaseFence, Page, UnitOfWorkFactory

from ._recipients import RecipientScope, read_recipients
from ._results import stored_result
from ._spec import recipient_record

__all__ = ["ExecutionLedger", "UnitOfWorkLedger"]


class ExecutionLedger(Protocol):
    """Hot statements of an executing run.

    ``read_records`` is read-only: it never waits for writers (WAL readers, PostgreSQL MVCC); it returns
    ``recipient_record`` of each recipient ``read_recipients`` would return. ``mark_dispatched`` and
    ``record_results`` first check ``fence`` at ``now`` (``LeaseExpired`` when the lease is no longer
    current) and then behave exactly like ``runs.mark_dispatched`` and ``run_items.record_results`` (of
    ``stored_result`` of each result), committing before they return.
    """

    async def read_records(
        self, scope: RecipientScope, after: int | None, limit: int
    ) -> Page[RecipientRecord, int]: ...

    async def mark_dispatched(
        self, fence: LeaseFence, now: datetime, workspace_id: str, run_id: str, through_sequence: int
    ) -> None: ...

    async def record_results(
        self,
        fence: LeaseFence,
        now: datetime,
        workspace_id: str,
        run_id: str,
        results: Sequence[EngineItemResult],
    ) -> None: ...


class UnitOfWorkLedger:
    """The ledger spelled with units of work and repositories (any database)."""

    def __init__(self, uow: UnitOfWorkFactory) -> None:
        self._uow = uow

    async def read_records(
        self, scope: RecipientScope, after: int | None, limit: int
    ) -> Page[RecipientRecord, int]:
        async with self._uow(read_only=True) as uow:
            page = await read_recipients(uow, scope, after, limit)
        return Page([recipient_record(scope.run_id, r) for r in page.items], page.next_after)

    async def mark_dispatched(
        self, fence: LeaseFence, now: datetime, workspace_id: str, run_id: str, through_sequence: int
    ) -> None:
        async with self._uow() as uow:
            await uow.leases.check(fence, now)
            await uow.runs.mark_dispatched(workspace_id, run_id, through_sequence=through_sequence)

    async def record_results(
        self,
        fence: LeaseFence,
        now: datetime,
        workspace_id: str,
        run_id: str,
        results: Sequence[EngineItemResult],
    ) -> None:
        stored = [stored_result(result) for result in results]
        async with self._uow() as uow:
            await uow.leases.check(fence, now)
            await uow.run_items.record_results(workspace_id, run_id, stored)
