"""Keyset paging: limit + 1 reads, stable (timestamp, id) order, no gaps or repeats across pages."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.contract.repositories._world import add_run, add_workspace, build_world, new_account
from tests.fixtures.db import SteppingClock
from wepush.server.domain import Keyset, PageRequest, RunEventDraft, RunState
from wepush.server.infra.db import SqlUnitOfWorkFactory


async def test_pages_walk_every_row_once_in_newest_first_order_even_with_equal_timestamps(
    uow_factory: SqlUnitOfWorkFactory, db_clock: SteppingClock
) -> None:
    workspace = await add_workspace(uow_factory, db_clock.now)
    accounts = []
    for n in range(7):
        # Pairs share a created_at: the id must break the tie deterministically.
        created = db_clock.now + timedelta(seconds=n // 2)
        accounts.append(new_account(workspace.id, created, name=f"account-{n}"))
    async with uow_factory() as uow:
        for account in accounts:
            await uow.accounts.add(account)

    expected = sorted(accounts, key=lambda a: (a.created_at, a.id), reverse=True)
    seen: list[str] = []
    pages = 0
    after: Keyset | None = None
    while True:
        async with uow_factory(read_only=True) as uow:
            page = await uow.accounts.list_page(workspace.id, PageRequest(limit=3, after=after))
        pages += 1
        seen += [a.id for a in page.items]
        if not page.has_more:
            break
        after = page.next_after
    assert seen == [a.id for a in expected]
    assert pages == 3


async def test_an_exactly_full_last_page_reports_no_more(
    uow_factory: SqlUnitOfWorkFactory, db_clock: SteppingClock
) -> None:
    workspace = await add_workspace(uow_factory, db_clock.now)
    async with uow_factory() as uow:
        for n in range(4):
            await uow.accounts.add(new_account(workspace.id, db_clock.advance(), name=f"a{n}"))
        first = await uow.accounts.list_page(workspace.id, PageRequest(limit=2))
        second = await uow.accounts.list_page(workspace.id, PageRequest(limit=2, after=first.next_after))
    assert first.has_more
    assert len(second.items) == 2
    assert not second.has_more
    assert second.next_after is None


async def test_run_lists_filter_by_state_and_job_and_page_stably(
    uow_factory: SqlUnitOfWorkFactory, db_clock: SteppingClock
) -> None:
    world = await build_world(uow_factory, db_clock.now)
    runs = [await add_run(uow_factory, world, db_clock.advance()) for _ in range(5)]
    async with uow_factory() as uow:
        await uow.runs.transition(
            world.workspace.id, runs[1].id, expected_version=1, target=RunState.CANCELLING
        )
        await uow.runs.transition(
            world.workspace.id, runs[3].id, expected_version=1, target=RunState.CANCELLING
        )
        pending = await uow.runs.list_page(
            world.workspace.id, PageRequest(limit=2), states=[RunState.PENDING]
        )
        more = await uow.runs.list_page(
            world.workspace.id, PageRequest(limit=2, after=pending.next_after), states=[RunState.PENDING]
        )
        by_job = await uow.runs.list_page(world.workspace.id, PageRequest(limit=10), job_id=world.job.id)
        oldest_first = await uow.runs.scan([RunState.CANCELLING], PageRequest(limit=10))
    assert [r.id for r in pending.items + more.items] == [runs[4].id, runs[2].id, runs[0].id]
    assert len(by_job.items) == 5
    assert [r.id for r in oldest_first.items] == [runs[1].id, runs[3].id]


@pytest.mark.parametrize("limit", [1, 4, 10])
async def test_event_pages_continue_after_the_last_seen_sequence(
    uow_factory: SqlUnitOfWorkFactory, db_clock: SteppingClock, limit: int
) -> None:
    world = await build_world(uow_factory, db_clock.now)
    run = await add_run(uow_factory, world, db_clock.now)
    async with uow_factory() as uow:
        await uow.run_events.append(
            world.workspace.id,
            run.id,
            [RunEventDraft(type="PROGRESS", occurred_at=db_clock.now, data={"n": n}) for n in range(9)],
        )
    seen: list[int] = []
    after: int | None = 2
    while True:
        async with uow_factory(read_only=True) as uow:
            page = await uow.run_events.list_page(run.id, PageRequest(limit=limit, after=after))
        seen += [e.sequence for e in page.items]
        if page.next_after is None:
            break
        after = page.next_after
    assert seen == list(range(3, 10))
