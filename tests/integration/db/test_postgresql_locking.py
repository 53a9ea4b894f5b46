"""PostgreSQL-only locking behaviour behind the repository contract (SQLite has a single writer)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.contract.repositories._world import World, add_run, build_world
from tests.fixtures.db import SteppingClock
from wepush.server.domain import Agent, Schedule
from wepush.server.infra.db import SqlUnitOfWorkFactory, create_database

pytestmark = pytest.mark.postgres

NOW = datetime(2026, 8, 22, 8, 30, tzinfo=UTC)


@pytest.fixture
async def pg(postgres_url: str) -> AsyncIterator[SqlUnitOfWorkFactory]:
    engine: AsyncEngine = create_database(postgres_url)
    try:
        yield SqlUnitOfWorkFactory(engine, clock=SteppingClock(NOW))
    finally:
        await engine.dispose()


async def _agent(uow_factory: SqlUnitOfWorkFactory, world: World) -> Agent:
    agent = Agent(
        workspace_id=world.workspace.id, display_name="w", agent_version="1", created_at=NOW, updated_at=NOW
    )
    async with uow_factory() as uow:
        await uow.agents.add(agent)
    return agent


async def test_claim_next_skips_a_run_another_transaction_is_claiming_instead_of_waiting(
    pg: SqlUnitOfWorkFactory,
) -> None:
    world = await build_world(pg, NOW)
    first_run = await add_run(pg, world, NOW)
    second_run = await add_run(pg, world, NOW + timedelta(seconds=1))
    agent = await _agent(pg, world)

    async with pg() as slow:
        held = await slow.leases.claim_next(
            world.workspace.id,
            agent.id,
            expires_at=NOW + timedelta(minutes=1),
            ack_deadline=NOW + timedelta(minutes=1),
        )
        # The first transaction still holds its candidate row lock; a second claimer must not block on it.
        async with pg() as fast:
            other = await asyncio.wait_for(
                fast.leases.claim_next(
                    world.workspace.id,
                    agent.id,
                    expires_at=NOW + timedelta(minutes=1),
                    ack_deadline=NOW + timedelta(minutes=1),
                ),
                timeout=5,
            )
    assert held is not None
    assert other is not None
    assert (held.lease.run_id, other.lease.run_id) == (first_run.id, second_run.id)


async def test_two_schedule_scanners_never_see_the_same_due_schedule(pg: SqlUnitOfWorkFactory) -> None:
    world = await build_world(pg, NOW)
    async with pg() as uow:
        for n in range(3):
            await uow.schedules.add(
                Schedule(
                    workspace_id=world.workspace.id,
                    job_id=world.job.id,
                    name=f"s{n}",
                    cron="* * * * *",
                    timezone="UTC",
                    next_fire_at=NOW - timedelta(minutes=n),
                    created_at=NOW,
                    updated_at=NOW,
                )
            )

    async with pg() as first, pg() as second:
        mine = await first.schedules.due(NOW, limit=2)
        theirs = await asyncio.wait_for(second.schedules.due(NOW, limit=2), timeout=5)
    assert len(mine) == 2
    assert len(theirs) == 1
    assert {s.id for s in mine}.isdisjoint({s.id for s in theirs})
