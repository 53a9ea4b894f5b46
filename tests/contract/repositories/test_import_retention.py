"""Import retention on both databases: open imports expire at their deadline, and staging rows of every
import past its deadline are deleted in bounded batches; committed snapshots and younger imports stay."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from tests.contract.repositories._world import accepted, add_workspace, new_import, rejected
from tests.fixtures.db import SteppingClock
from wepush.server.application.import_retention import (
    STAGING_GRACE,
    ImportRetention,
    ImportSweepReport,
    discard_staging_in_batches,
)
from wepush.server.domain import Audience, AudienceImport, ImportState, PageRequest
from wepush.server.infra.db import SqlUnitOfWorkFactory

DAY = timedelta(hours=24)


async def _audience(uow_factory: SqlUnitOfWorkFactory, clock: SteppingClock) -> Audience:
    workspace = await add_workspace(uow_factory, clock.now)
    audience = Audience(workspace_id=workspace.id, name="people", created_at=clock.now, updated_at=clock.now)
    async with uow_factory() as uow:
        await uow.audiences.add(audience)
    return audience


async def _staged(
    uow_factory: SqlUnitOfWorkFactory, audience: Audience, clock: SteppingClock, lines: int, *, commit: bool
) -> AudienceImport:
    created = new_import(audience.workspace_id, audience.id, clock.now, ["mobile"])
    async with uow_factory() as uow:
        await uow.audience_imports.add(created)
        await uow.audience_imports.stage_rows(
            created.id, [accepted(n, f"k{n}") if n % 5 else rejected(n) for n in range(1, lines + 1)]
        )
        counts = await uow.audience_imports.count_staged(created.id)
        staged = await uow.audience_imports.update(replace(created, state=ImportState.STAGED, counts=counts))
        if commit:
            current = await uow.audiences.get(audience.workspace_id, audience.id)
            staged = (await uow.audience_imports.commit(current, staged)).audience_import
    return staged


async def _rows(uow_factory: SqlUnitOfWorkFactory, import_id: str) -> int:
    async with uow_factory(read_only=True) as uow:
        return (await uow.audience_imports.count_staged(import_id)).total_rows


async def test_a_sweep_expires_open_imports_and_discards_staging_past_the_deadline(
    uow_factory: SqlUnitOfWorkFactory, db_clock: SteppingClock
) -> None:
    audience = await _audience(uow_factory, db_clock)
    open_import = await _staged(uow_factory, audience, db_clock, 23, commit=False)
    committed = await _staged(uow_factory, audience, db_clock, 12, commit=True)
    db_clock.advance(DAY - timedelta(hours=1))
    young = await _staged(uow_factory, audience, db_clock, 4, commit=False)
    retention = ImportRetention(uow_factory, db_clock, batch_rows=5)

    assert await retention.sweep() == ImportSweepReport()
    db_clock.advance(timedelta(hours=1))
    at_deadline = await retention.sweep()
    kept = [await _rows(uow_factory, i.id) for i in (open_import, committed)]
    db_clock.advance(STAGING_GRACE - timedelta(seconds=1))
    within_grace = await retention.sweep()
    db_clock.advance(timedelta(seconds=1))
    first = await retention.sweep()
    again = await retention.sweep()

    # Expired at the deadline; the rows go once the grace period (for downloads under way) is over.
    assert at_deadline == ImportSweepReport(expired_imports=1)
    assert kept == [23, 12]
    assert within_grace == ImportSweepReport()
    assert first == ImportSweepReport(discarded_imports=2, discarded_rows=35)
    assert again == ImportSweepReport()
    async with uow_factory(read_only=True) as uow:
        states = {
            i.id: (await uow.audience_imports.get(audience.workspace_id, i.id)).state
            for i in (open_import, committed, young)
        }
        snapshot = await uow.audiences.get_snapshot(audience.workspace_id, committed.snapshot_id or "")
        recipients = await uow.audiences.list_recipients(snapshot.id, PageRequest(limit=100))
    assert states == {
        open_import.id: ImportState.EXPIRED,
        committed.id: ImportState.COMMITTED,
        young.id: ImportState.STAGED,
    }
    assert [await _rows(uow_factory, i.id) for i in (open_import, committed, young)] == [0, 0, 4]
    assert snapshot.recipient_count == len(recipients.items) == 10


async def test_discarding_an_import_takes_bounded_batches_first_lines_first(
    uow_factory: SqlUnitOfWorkFactory, db_clock: SteppingClock
) -> None:
    audience = await _audience(uow_factory, db_clock)
    staged = await _staged(uow_factory, audience, db_clock, 7, commit=False)

    async with uow_factory() as uow:
        deleted = await uow.audience_imports.discard_staging_rows(staged.id, 3)
        left = await uow.audience_imports.list_staged(staged.id, PageRequest(limit=10))

    assert deleted == 3
    assert [r.line_number for r in left.items] == [4, 5, 6, 7]


async def test_all_staging_rows_of_an_import_go_one_bounded_transaction_at_a_time(
    uow_factory: SqlUnitOfWorkFactory, db_clock: SteppingClock
) -> None:
    audience = await _audience(uow_factory, db_clock)
    staged = await _staged(uow_factory, audience, db_clock, 7, commit=False)
    other = await _staged(uow_factory, audience, db_clock, 2, commit=False)
    transactions = 0

    def counting(**options: bool) -> object:
        nonlocal transactions
        transactions += 1
        return uow_factory(**options)

    assert await discard_staging_in_batches(counting, staged.id, batch_rows=3) == 7  # type: ignore[arg-type]

    assert transactions == 3  # 3 + 3 + 1 rows
    assert await _rows(uow_factory, staged.id) == 0
    assert await _rows(uow_factory, other.id) == 2


async def test_staging_lists_the_uploads_in_progress_of_every_workspace_oldest_deadline_first(
    uow_factory: SqlUnitOfWorkFactory, db_clock: SteppingClock
) -> None:
    first = await _audience(uow_factory, db_clock)
    other = await add_workspace(uow_factory, db_clock.now, "other")
    second = Audience(workspace_id=other.id, name="people", created_at=db_clock.now, updated_at=db_clock.now)
    async with uow_factory() as uow:
        await uow.audiences.add(second)
    receiving = []
    for audience in (first, second, first):
        created = new_import(audience.workspace_id, audience.id, db_clock.now, ["mobile"])
        created = replace(created, options={**created.options, "receivedBy": "a"})
        db_clock.advance(timedelta(minutes=1))
        async with uow_factory() as uow:
            await uow.audience_imports.add(created)
        receiving.append(created)
    await _staged(uow_factory, first, db_clock, 3, commit=False)  # STAGED: no longer receiving
    waiting = new_import(first.workspace_id, first.id, db_clock.now, ["mobile"])
    async with uow_factory() as uow:
        await uow.audience_imports.add(replace(waiting, state=ImportState.CREATED))

    async with uow_factory(read_only=True) as uow:
        found = await uow.audience_imports.staging()

    assert [i.id for i in found] == [i.id for i in receiving]
    assert {i.workspace_id for i in found} == {first.workspace_id, second.workspace_id}
    assert all(i.options["receivedBy"] == "a" and i.state is ImportState.STAGING for i in found)
