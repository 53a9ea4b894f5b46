"""Row locks that keep concurrent transactions on PostgreSQL from deleting what another is referencing.

Each test holds a row the way a use case does (``referencing=True`` / ``for_membership_change=True``),
starts the competing write on another connection, waits until PostgreSQL reports it waiting for a lock,
and only then finishes the first transaction. Without the lock the competing write would not wait, the
wait would never be seen and the test fails. SQLite needs none of this: its writers run one at a time.
"""

from __future__ import annotations

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.contract.repositories._world import build_world, new_account, new_run
from tests.fixtures.db import SteppingClock, waiting_on_a_lock
from wepush.server.domain import (
    Job,
    PageRequest,
    ResourceInUse,
    RunCommand,
    RunCommandType,
    RunState,
)
from wepush.server.infra.db import SqlUnitOfWorkFactory


async def test_an_account_delete_waits_for_the_job_being_created_and_then_sees_it(
    pg_engine: AsyncEngine, pg_uow: SqlUnitOfWorkFactory, db_clock: SteppingClock
) -> None:
    world = await build_world(pg_uow, db_clock.now)
    spare = new_account(world.workspace.id, db_clock.now, name="spare")
    async with pg_uow() as uow:
        await uow.accounts.add(spare)

    async def delete_spare() -> None:
        async with pg_uow() as uow:
            await uow.accounts.delete(world.workspace.id, spare.id, spare.version)

    async with pg_uow() as creating:
        await creating.accounts.get(world.workspace.id, spare.id, referencing=True)
        deleting = await waiting_on_a_lock(pg_engine, delete_spare())
        await creating.jobs.add(
            Job(
                workspace_id=world.workspace.id,
                name="uses spare",
                account_id=spare.id,
                message_id=world.message.id,
                message_revision=1,
                audience_snapshot_id=world.snapshot.id,
                policies={},
                created_at=db_clock.now,
                updated_at=db_clock.now,
            )
        )

    with pytest.raises(ResourceInUse):
        await deleting


async def test_a_job_delete_waits_for_the_run_being_started_and_then_sees_it(
    pg_engine: AsyncEngine, pg_uow: SqlUnitOfWorkFactory, db_clock: SteppingClock
) -> None:
    world = await build_world(pg_uow, db_clock.now)

    async def delete_job() -> None:
        async with pg_uow() as uow:
            await uow.jobs.delete(world.workspace.id, world.job.id, world.job.version)

    async with pg_uow() as starting:
        await starting.jobs.get(world.workspace.id, world.job.id, referencing=True)
        deleting = await waiting_on_a_lock(pg_engine, delete_job())
        await starting.runs.add(new_run(world, db_clock.now))

    with pytest.raises(ResourceInUse):
        await deleting


async def test_a_run_finishing_while_a_command_is_accepted_waits_and_then_sees_the_command(
    pg_engine: AsyncEngine, pg_uow: SqlUnitOfWorkFactory, db_clock: SteppingClock
) -> None:
    world = await build_world(pg_uow, db_clock.now)
    run = new_run(world, db_clock.now, state=RunState.RUNNING)
    async with pg_uow() as uow:
        await uow.runs.add(run)

    async def finish() -> list[str]:
        async with pg_uow() as uow:
            await uow.runs.transition(
                world.workspace.id, run.id, expected_version=run.version, target=RunState.SUCCEEDED
            )
            # What the executor does next: answer every command still pending.
            page = await uow.run_commands.list_for_run(run.id, PageRequest(limit=100))
            return [c.command_id for c in page.items]

    async with pg_uow() as commanding:
        await commanding.runs.get(world.workspace.id, run.id, referencing=True)
        finishing = await waiting_on_a_lock(pg_engine, finish())
        command = RunCommand(
            workspace_id=world.workspace.id,
            run_id=run.id,
            command_id="cancel-1",
            type=RunCommandType.CANCEL,
            created_at=db_clock.now,
            updated_at=db_clock.now,
        )
        await commanding.run_commands.add(command)

    assert await finishing == ["cancel-1"]


async def test_membership_changes_of_one_workspace_run_one_at_a_time(
    pg_engine: AsyncEngine, pg_uow: SqlUnitOfWorkFactory, db_clock: SteppingClock
) -> None:
    world = await build_world(pg_uow, db_clock.now)

    async def rename_under_change() -> str:
        async with pg_uow() as uow:
            workspace = await uow.workspaces.get(world.workspace.id, for_membership_change=True)
            return workspace.name

    async with pg_uow() as first:
        await first.workspaces.get(world.workspace.id, for_membership_change=True)
        second = await waiting_on_a_lock(pg_engine, rename_under_change())

    assert await second == world.workspace.name
