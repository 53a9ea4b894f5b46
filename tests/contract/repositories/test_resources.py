"""Accounts, messages, audiences, jobs and schedules: CRUD, optimistic locking, revisions, references."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from tests.contract.repositories._world import add_run, add_workspace, build_world, new_account
from tests.fixtures.db import SteppingClock
from wepush.server.domain import (
    Audience,
    DuplicateResource,
    Keyset,
    MessageRevision,
    MisfirePolicy,
    NameAlreadyUsed,
    NotFound,
    PageRequest,
    ResourceInUse,
    Schedule,
    VersionConflict,
    new_id,
)
from wepush.server.infra.db import SqlUnitOfWorkFactory


async def test_account_round_trips_and_update_bumps_version(
    uow_factory: SqlUnitOfWorkFactory, db_clock: SteppingClock
) -> None:
    workspace = await add_workspace(uow_factory, db_clock.now)
    account = new_account(workspace.id, db_clock.now)
    async with uow_factory() as uow:
        await uow.accounts.add(account)

    db_clock.advance(timedelta(minutes=5))
    async with uow_factory() as uow:
        stored = await uow.accounts.get(workspace.id, account.id)
        updated = await uow.accounts.update(
            replace(stored, description="primary", config={"baseUrl": "https://b"})
        )

    assert stored == account
    assert updated.version == 2
    assert updated.updated_at == db_clock.now
    assert updated.created_at == account.created_at
    async with uow_factory(read_only=True) as uow:
        assert await uow.accounts.get(workspace.id, account.id) == updated


async def test_update_based_on_a_stale_version_is_a_version_conflict(
    uow_factory: SqlUnitOfWorkFactory, db_clock: SteppingClock
) -> None:
    world = await build_world(uow_factory, db_clock.now)
    async with uow_factory() as uow:
        await uow.accounts.update(replace(world.account, description="first editor"))

    with pytest.raises(VersionConflict) as conflict:
        async with uow_factory() as uow:
            await uow.accounts.update(replace(world.account, description="second editor"))

    assert conflict.value.code == "VERSION_CONFLICT"
    async with uow_factory() as uow:
        assert (await uow.accounts.get(world.workspace.id, world.account.id)).description == "first editor"


@pytest.mark.parametrize("kind", ["message", "audience", "job"])
async def test_every_editable_resource_rejects_stale_updates(
    uow_factory: SqlUnitOfWorkFactory, db_clock: SteppingClock, kind: str
) -> None:
    world = await build_world(uow_factory, db_clock.now)
    entity: Any = {"message": world.message, "audience": world.audience, "job": world.job}[kind]
    async with uow_factory() as uow:
        repo = getattr(uow, f"{kind}s")
        fresh = await repo.update(replace(entity, name="renamed"))
    assert fresh.version == entity.version + 1

    with pytest.raises(VersionConflict):
        async with uow_factory() as uow:
            await getattr(uow, f"{kind}s").update(replace(entity, name="stale"))


async def test_account_names_are_unique_among_live_accounts_only(
    uow_factory: SqlUnitOfWorkFactory, db_clock: SteppingClock
) -> None:
    workspace = await add_workspace(uow_factory, db_clock.now)
    first = new_account(workspace.id, db_clock.now, name="sms")
    async with uow_factory() as uow:
        await uow.accounts.add(first)

    with pytest.raises(NameAlreadyUsed):
        async with uow_factory() as uow:
            await uow.accounts.add(new_account(workspace.id, db_clock.now, name="sms"))

    async with uow_factory() as uow:
        await uow.accounts.delete(workspace.id, first.id, expected_version=first.version)
        reused = await uow.accounts.add(new_account(workspace.id, db_clock.now, name="sms"))

    async with uow_factory() as uow:
        assert (await uow.accounts.get(workspace.id, reused.id)).name == "sms"
        with pytest.raises(NotFound):
            await uow.accounts.get(workspace.id, first.id)


async def test_resources_are_invisible_from_another_workspace(
    uow_factory: SqlUnitOfWorkFactory, db_clock: SteppingClock
) -> None:
    world = await build_world(uow_factory, db_clock.now)
    other = await add_workspace(uow_factory, db_clock.now, name="other")

    async with uow_factory() as uow:
        with pytest.raises(NotFound):
            await uow.accounts.get(other.id, world.account.id)
        with pytest.raises(NotFound):
            await uow.jobs.update(replace(world.job, workspace_id=other.id))


async def test_message_revisions_are_unique_and_earlier_revisions_never_change(
    uow_factory: SqlUnitOfWorkFactory, db_clock: SteppingClock
) -> None:
    world = await build_world(uow_factory, db_clock.now)
    second = MessageRevision.of(
        workspace_id=world.workspace.id,
        message_id=world.message.id,
        revision=2,
        content={"path": "/v2"},
        now=db_clock.advance(),
    )
    async with uow_factory() as uow:
        message = await uow.messages.update(replace(world.message, latest_revision=2))
        await uow.messages.add_revision(second)

    clash = replace(second, content={"path": "/other"}, id="0190d2c8-0000-7000-8000-000000000002")
    with pytest.raises(DuplicateResource):
        async with uow_factory() as uow:
            await uow.messages.add_revision(clash)

    async with uow_factory(read_only=True) as uow:
        first = await uow.messages.get_revision(world.workspace.id, world.message.id, 1)
        latest = await uow.messages.get_revision(world.workspace.id, world.message.id, 2)
        page = await uow.messages.list_revisions(world.workspace.id, world.message.id, PageRequest(limit=10))
    assert message.latest_revision == 2
    assert first == world.revision
    assert latest.content == {"path": "/v2"}
    assert latest.content_hash == second.content_hash != first.content_hash
    assert [r.revision for r in page.items] == [1, 2]
    assert not page.has_more


async def test_deleting_resources_used_by_a_run_is_refused_with_resource_in_use(
    uow_factory: SqlUnitOfWorkFactory, db_clock: SteppingClock
) -> None:
    world = await build_world(uow_factory, db_clock.now)
    await add_run(uow_factory, world, db_clock.now)

    async with uow_factory() as uow:
        job_refs = await uow.jobs.references(world.workspace.id, world.job.id)
        snapshot_refs = await uow.audiences.snapshot_references(world.workspace.id, world.snapshot.id)
    assert (job_refs.runs, job_refs.schedules) == (1, 0)
    assert (snapshot_refs.runs, snapshot_refs.jobs) == (1, 1)

    deletions = [
        ("account", world.account.id, world.account.version),
        ("message", world.message.id, world.message.version),
        ("audience", world.audience.id, world.audience.version),
        ("job", world.job.id, world.job.version),
    ]
    for kind, resource_id, version in deletions:
        with pytest.raises(ResourceInUse) as refused:
            async with uow_factory() as uow:
                await getattr(uow, f"{kind}s").delete(world.workspace.id, resource_id, version)
        assert refused.value.code == "RESOURCE_IN_USE"
        assert refused.value.references.runs == 1

    async with uow_factory() as uow:
        assert (await uow.jobs.get(world.workspace.id, world.job.id)).id == world.job.id


async def test_unreferenced_job_is_deleted_and_then_reported_missing(
    uow_factory: SqlUnitOfWorkFactory, db_clock: SteppingClock
) -> None:
    world = await build_world(uow_factory, db_clock.now)
    async with uow_factory() as uow:
        refs_before = await uow.accounts.references(world.workspace.id, world.account.id)
        await uow.jobs.delete(world.workspace.id, world.job.id, world.job.version)

    async with uow_factory() as uow:
        refs_after = await uow.accounts.references(world.workspace.id, world.account.id)
        with pytest.raises(NotFound):
            await uow.jobs.get(world.workspace.id, world.job.id)
        page = await uow.jobs.list_page(world.workspace.id, PageRequest(limit=10))
        await uow.accounts.delete(world.workspace.id, world.account.id, world.account.version)
    assert (refs_before.jobs, refs_after.jobs) == (1, 0)
    assert page.items == []


async def test_job_with_a_schedule_cannot_be_deleted(
    uow_factory: SqlUnitOfWorkFactory, db_clock: SteppingClock
) -> None:
    world = await build_world(uow_factory, db_clock.now)
    schedule = Schedule(
        workspace_id=world.workspace.id,
        job_id=world.job.id,
        cron="0 9 * * 1",
        timezone="Asia/Shanghai",
        created_at=db_clock.now,
        updated_at=db_clock.now,
    )
    async with uow_factory() as uow:
        await uow.schedules.add(schedule)

    with pytest.raises(ResourceInUse) as refused:
        async with uow_factory() as uow:
            await uow.jobs.delete(world.workspace.id, world.job.id, world.job.version)
    assert refused.value.references.schedules == 1


async def test_schedules_update_optimistically_and_due_ones_are_found(
    uow_factory: SqlUnitOfWorkFactory, db_clock: SteppingClock
) -> None:
    world = await build_world(uow_factory, db_clock.now)
    now = db_clock.now

    def schedule(name: str, *, enabled: bool, next_fire_in: timedelta | None) -> Schedule:
        return Schedule(
            workspace_id=world.workspace.id,
            job_id=world.job.id,
            name=name,
            cron="*/5 * * * *",
            timezone="UTC",
            enabled=enabled,
            misfire_policy=MisfirePolicy.CATCH_UP_LIMITED,
            catch_up_limit=3,
            next_fire_at=None if next_fire_in is None else now + next_fire_in,
            created_at=now,
            updated_at=now,
        )

    overdue = schedule("overdue", enabled=True, next_fire_in=timedelta(minutes=-10))
    due_now = schedule("due", enabled=True, next_fire_in=timedelta(0))
    later = schedule("later", enabled=True, next_fire_in=timedelta(minutes=5))
    disabled = schedule("disabled", enabled=False, next_fire_in=timedelta(minutes=-10))
    never = schedule("never", enabled=True, next_fire_in=None)
    async with uow_factory() as uow:
        for s in (overdue, due_now, later, disabled, never):
            await uow.schedules.add(s)

    async with uow_factory() as uow:
        due = await uow.schedules.due(now, limit=10)
        fired = await uow.schedules.update(
            replace(due[0], last_fire_at=due[0].next_fire_at, next_fire_at=now + timedelta(minutes=5))
        )
    assert [s.name for s in due] == ["overdue", "due"]
    assert due[0].misfire_policy is MisfirePolicy.CATCH_UP_LIMITED
    assert fired.version == 2

    with pytest.raises(VersionConflict):
        async with uow_factory() as uow:
            await uow.schedules.update(replace(overdue, enabled=False))
    async with uow_factory() as uow:
        assert [s.name for s in await uow.schedules.due(now, limit=10)] == ["due"]
        await uow.schedules.delete(world.workspace.id, fired.id, fired.version)
        with pytest.raises(NotFound):
            await uow.schedules.get(world.workspace.id, fired.id)


async def test_list_pages_only_show_the_workspace_live_resources(
    uow_factory: SqlUnitOfWorkFactory, db_clock: SteppingClock
) -> None:
    world = await build_world(uow_factory, db_clock.now)
    extra = Audience(
        workspace_id=world.workspace.id, name="vip", created_at=db_clock.advance(), updated_at=db_clock.now
    )
    async with uow_factory() as uow:
        await uow.audiences.add(extra)
        page = await uow.audiences.list_page(world.workspace.id, PageRequest(limit=1))
        rest = await uow.audiences.list_page(world.workspace.id, PageRequest(limit=1, after=page.next_after))
    assert [a.name for a in page.items] == ["vip"]
    assert page.next_after == Keyset(extra.created_at, extra.id)
    assert [a.name for a in rest.items] == ["customers"]
    assert rest.items[0].latest_snapshot_id == world.snapshot.id
    assert not rest.has_more


async def _add_copy(uow: Any, world: Any, kind: str, name: str) -> Any:
    """Another live resource of ``kind`` like the world's, under ``name``."""
    fresh = new_id()
    if kind == "message":
        message = replace(world.message, id=fresh, name=name)
        return await uow.messages.add(message, replace(world.revision, id=new_id(), message_id=fresh))
    if kind == "audience":
        return await uow.audiences.add(replace(world.audience, id=fresh, name=name))
    return await uow.jobs.add(replace(world.job, id=fresh, name=name))


@pytest.mark.parametrize("kind", ["message", "audience", "job"])
async def test_message_audience_and_job_names_are_unique_among_live_ones(
    uow_factory: SqlUnitOfWorkFactory, db_clock: SteppingClock, kind: str
) -> None:
    world = await build_world(uow_factory, db_clock.now)
    taken: str = getattr(world, kind).name

    with pytest.raises(NameAlreadyUsed):
        async with uow_factory() as uow:
            await _add_copy(uow, world, kind, taken)
    async with uow_factory() as uow:
        other = await _add_copy(uow, world, kind, f"{taken} 2")
    with pytest.raises(NameAlreadyUsed):
        async with uow_factory() as uow:
            await getattr(uow, f"{kind}s").update(replace(other, name=taken))

    async with uow_factory() as uow:
        await getattr(uow, f"{kind}s").delete(world.workspace.id, other.id, expected_version=other.version)
        reused = await _add_copy(uow, world, kind, f"{taken} 2")
    assert reused.name == f"{taken} 2"
