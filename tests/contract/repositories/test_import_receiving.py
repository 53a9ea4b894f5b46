"""An upload's lease on its import, on both databases: a renewal moves it without counting as a change,
and an upload is failed as abandoned only while still STAGING with its lease run out, in one statement."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import timedelta

from tests.contract.repositories._world import accepted, add_workspace, new_import
from tests.fixtures.db import SteppingClock
from wepush.server.domain import Audience, AudienceImport, ImportCounts, ImportState
from wepush.server.infra.db import SqlUnitOfWorkFactory

LEASE = timedelta(minutes=5)
REASON = "the upload was abandoned"


async def _receiving(
    uow_factory: SqlUnitOfWorkFactory,
    clock: SteppingClock,
    *,
    leased: bool = True,
    workspace: str = "default",
) -> AudienceImport:
    workspace_ = await add_workspace(uow_factory, clock.now, workspace)
    audience = Audience(workspace_id=workspace_.id, name="people", created_at=clock.now, updated_at=clock.now)
    created = new_import(workspace_.id, audience.id, clock.now, ["mobile"])
    if leased:
        created = replace(created, receiving_until=clock.now + LEASE)
    async with uow_factory() as uow:
        await uow.audiences.add(audience)
        await uow.audience_imports.add(replace(created, counts=ImportCounts(total_rows=2, accepted_rows=2)))
        await uow.audience_imports.stage_rows(created.id, [accepted(2, "k2"), accepted(3, "k3")])
        return await uow.audience_imports.get(workspace_.id, created.id)


async def test_a_renewal_moves_the_lease_of_a_staging_import_and_is_no_change(
    uow_factory: SqlUnitOfWorkFactory, db_clock: SteppingClock
) -> None:
    receiving = await _receiving(uow_factory, db_clock)
    db_clock.advance(timedelta(minutes=1))
    async with uow_factory() as uow:
        renewed = await uow.audience_imports.renew_receiving(receiving.id, db_clock.now + LEASE)
        after = await uow.audience_imports.get(receiving.workspace_id, receiving.id)

    assert renewed is True
    assert after.receiving_until == db_clock.now + LEASE
    # The upload's own later update still matches: a heartbeat is not a concurrent edit.
    assert (after.version, after.updated_at) == (receiving.version, receiving.updated_at)


async def test_a_renewal_of_an_import_no_longer_staging_says_so_and_changes_nothing(
    uow_factory: SqlUnitOfWorkFactory, db_clock: SteppingClock
) -> None:
    receiving = await _receiving(uow_factory, db_clock)
    async with uow_factory() as uow:
        staged = await uow.audience_imports.update(
            replace(receiving, state=ImportState.STAGED, receiving_until=None)
        )
    async with uow_factory() as uow:
        renewed = await uow.audience_imports.renew_receiving(receiving.id, db_clock.now + LEASE)
        after = await uow.audience_imports.get(receiving.workspace_id, receiving.id)

    assert renewed is False
    assert after == staged


async def test_an_upload_is_failed_as_abandoned_only_once_its_lease_has_run_out(
    uow_factory: SqlUnitOfWorkFactory, db_clock: SteppingClock
) -> None:
    receiving = await _receiving(uow_factory, db_clock)
    lease_end = db_clock.now + LEASE
    async with uow_factory() as uow:
        at_the_end = await uow.audience_imports.fail_lapsed_upload(receiving.id, lease_end, REASON)
    db_clock.advance(LEASE + timedelta(seconds=1))
    async with uow_factory() as uow:
        failed = await uow.audience_imports.fail_lapsed_upload(receiving.id, db_clock.now, REASON)
        stored = await uow.audience_imports.get(receiving.workspace_id, receiving.id)
    async with uow_factory() as uow:
        again = await uow.audience_imports.fail_lapsed_upload(receiving.id, db_clock.now, REASON)

    assert at_the_end is None
    assert failed == stored
    assert (stored.state, stored.failure_reason, stored.counts) == (
        ImportState.FAILED,
        REASON,
        ImportCounts(),
    )
    assert (stored.version, stored.updated_at, stored.receiving_until) == (
        receiving.version + 1,
        db_clock.now,
        None,
    )
    assert again is None


async def test_a_renewed_lease_or_an_import_without_one_is_not_abandoned(
    uow_factory: SqlUnitOfWorkFactory, db_clock: SteppingClock
) -> None:
    renewed = await _receiving(uow_factory, db_clock)
    # Received by an instance older than the lease (during an upgrade): it has no lease to run out.
    unleased = await _receiving(uow_factory, db_clock, leased=False, workspace="older")
    db_clock.advance(LEASE - timedelta(seconds=1))
    async with uow_factory() as uow:
        await uow.audience_imports.renew_receiving(renewed.id, db_clock.now + LEASE)
    db_clock.advance(timedelta(minutes=2))
    async with uow_factory() as uow:
        results = [
            await uow.audience_imports.fail_lapsed_upload(found.id, db_clock.now, REASON)
            for found in (renewed, unleased)
        ]
        states = [
            (await uow.audience_imports.get(found.workspace_id, found.id)).state
            for found in (renewed, unleased)
        ]

    assert results == [None, None]
    assert states == [ImportState.STAGING, ImportState.STAGING]


async def test_staging_writes_run_side_by_side_exactly_where_the_factory_says_so(
    uow_factory: SqlUnitOfWorkFactory, db_clock: SteppingClock, database_backend: str
) -> None:
    # An upload keeps two staging writes in flight only where neither waits for the other's commit.
    receiving = await _receiving(uow_factory, db_clock)
    assert uow_factory.writers_side_by_side is (database_backend == "postgresql")
    if not uow_factory.writers_side_by_side:
        return
    async with uow_factory() as first:
        await first.audience_imports.stage_rows(receiving.id, [accepted(4, "k4")])
        # The first write is still open: a second one of the same import lands and commits meanwhile.
        async with asyncio.timeout(10), uow_factory() as second:
            await second.audience_imports.stage_rows(receiving.id, [accepted(5, "k5")])
    async with uow_factory(read_only=True) as uow:
        counts = await uow.audience_imports.count_staged(receiving.id)
    assert counts.accepted_rows == 4
