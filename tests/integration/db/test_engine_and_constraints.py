"""Engine settings and the database-level guarantees the repositories rely on."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from sqlalchemy import select, text
from sqlalchemy.exc import IntegrityError, StatementError
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.contract.repositories._world import add_run, build_world
from tests.fixtures.db import SteppingClock
from wepush.server.domain import Agent, RunEventDraft
from wepush.server.infra.db import SqlUnitOfWorkFactory, create_database, normalize_database_url, tables

NOW = datetime(2026, 8, 22, 8, 30, tzinfo=UTC)


@pytest.fixture
async def sqlite_engine(sqlite_url: str) -> AsyncIterator[AsyncEngine]:
    engine = create_database(sqlite_url)
    try:
        yield engine
    finally:
        await engine.dispose()


def test_plain_urls_select_the_async_drivers() -> None:
    assert normalize_database_url("sqlite:///data/wepush.db").drivername == "sqlite+aiosqlite"
    assert normalize_database_url("postgresql://u@h/db").drivername == "postgresql+asyncpg"
    with pytest.raises(ValueError, match="unsupported"):
        normalize_database_url("mysql://u@h/db")


async def test_sqlite_connections_use_wal_busy_timeout_and_foreign_keys(sqlite_engine: AsyncEngine) -> None:
    async with sqlite_engine.connect() as connection:
        journal = await connection.scalar(text("PRAGMA journal_mode"))
        busy = await connection.scalar(text("PRAGMA busy_timeout"))
        foreign_keys = await connection.scalar(text("PRAGMA foreign_keys"))
    assert (journal, busy, foreign_keys) == ("wal", 30_000, 1)


async def test_sqlite_enforces_foreign_keys(sqlite_engine: AsyncEngine) -> None:
    with pytest.raises(IntegrityError, match="FOREIGN KEY"):
        async with sqlite_engine.begin() as connection:
            await connection.execute(
                tables.workspace_member.insert().values(
                    id="m1",
                    workspace_id="missing",
                    principal_id="p",
                    role="ADMIN",
                    created_at=NOW,
                    updated_at=NOW,
                    version=1,
                )
            )


async def test_json_is_canonical_text_on_sqlite_and_jsonb_on_postgresql(
    uow_factory: SqlUnitOfWorkFactory, db_engine: AsyncEngine, db_clock: SteppingClock
) -> None:
    world = await build_world(uow_factory, db_clock.now)
    async with db_engine.connect() as connection:
        if connection.dialect.name == "sqlite":
            stored = await connection.scalar(
                text("SELECT config_json FROM account WHERE id = :id"), {"id": world.account.id}
            )
            assert stored == json.dumps(world.account.config, sort_keys=True, separators=(",", ":"))
        else:
            kind = await connection.scalar(
                text("SELECT pg_typeof(config_json)::text FROM account WHERE id = :id"),
                {"id": world.account.id},
            )
            key = await connection.scalar(
                text("SELECT config_json->'auth'->'token'->>'$secret' FROM account WHERE id = :id"),
                {"id": world.account.id},
            )
            assert (kind, key) == ("jsonb", "http-token")


async def test_instants_come_back_as_utc_and_naive_datetimes_are_refused(
    uow_factory: SqlUnitOfWorkFactory, db_engine: AsyncEngine, db_clock: SteppingClock
) -> None:
    world = await build_world(uow_factory, db_clock.now)
    shanghai = datetime(2026, 8, 22, 16, 30, tzinfo=ZoneInfo("Asia/Shanghai"))
    async with db_engine.begin() as connection:
        await connection.execute(
            tables.workspace.update()
            .where(tables.workspace.c.id == world.workspace.id)
            .values(updated_at=shanghai)
        )
        stored = await connection.scalar(
            select(tables.workspace.c.updated_at).where(tables.workspace.c.id == world.workspace.id)
        )
    assert stored == NOW
    assert stored.tzinfo is UTC

    with pytest.raises(StatementError, match="naive datetime"):
        async with db_engine.begin() as connection:
            await connection.execute(
                tables.workspace.update().values(updated_at=datetime(2026, 8, 22, 8, 30))
            )


async def test_the_database_refuses_a_second_active_lease_for_a_run(
    uow_factory: SqlUnitOfWorkFactory, db_engine: AsyncEngine, db_clock: SteppingClock
) -> None:
    world = await build_world(uow_factory, db_clock.now)
    run = await add_run(uow_factory, world, db_clock.now)
    agent = Agent(
        workspace_id=world.workspace.id, display_name="a", agent_version="1", created_at=NOW, updated_at=NOW
    )
    async with uow_factory() as uow:
        await uow.agents.add(agent)

    def lease(lease_id: str, epoch: int, state: str) -> dict[str, object]:
        return {
            "id": lease_id,
            "workspace_id": world.workspace.id,
            "run_id": run.id,
            "agent_id": agent.id,
            "state": state,
            "epoch": epoch,
            "fencing_token_hash": "0" * 64,
            "expires_at": NOW + timedelta(minutes=1),
            "ack_deadline": NOW,
            "last_event_sequence": 0,
            "created_at": NOW,
            "updated_at": NOW,
            "version": 1,
        }

    async with db_engine.begin() as connection:
        await connection.execute(tables.agent_lease.insert().values(**lease("l1", 1, "EXPIRED")))
        await connection.execute(tables.agent_lease.insert().values(**lease("l2", 2, "ACTIVE")))
        await connection.execute(tables.agent_lease.insert().values(**lease("l3", 3, "RELEASED")))
    with pytest.raises(IntegrityError):
        async with db_engine.begin() as connection:
            await connection.execute(tables.agent_lease.insert().values(**lease("l4", 4, "ACTIVE")))
    with pytest.raises(IntegrityError):
        async with db_engine.begin() as connection:
            await connection.execute(tables.agent_lease.insert().values(**lease("l5", 2, "REVOKED")))


async def test_the_database_refuses_a_duplicate_run_event_sequence(
    uow_factory: SqlUnitOfWorkFactory, db_engine: AsyncEngine, db_clock: SteppingClock
) -> None:
    world = await build_world(uow_factory, db_clock.now)
    run = await add_run(uow_factory, world, db_clock.now)
    async with uow_factory() as uow:
        [event] = await uow.run_events.append(
            world.workspace.id, run.id, [RunEventDraft(type="RUN_CREATED", occurred_at=NOW)]
        )
    with pytest.raises(IntegrityError):
        async with db_engine.begin() as connection:
            await connection.execute(
                tables.run_event.insert().values(
                    id="another",
                    workspace_id=world.workspace.id,
                    run_id=run.id,
                    sequence=event.sequence,
                    type="PROGRESS",
                    occurred_at=NOW,
                    data_json={},
                    created_at=NOW,
                    updated_at=NOW,
                    version=1,
                )
            )


async def test_a_failed_unit_of_work_leaves_nothing_behind(
    uow_factory: SqlUnitOfWorkFactory, db_clock: SteppingClock
) -> None:
    world = await build_world(uow_factory, db_clock.now)
    run = await add_run(uow_factory, world, db_clock.now)

    class Boom(Exception):
        pass

    async def change_then_fail() -> None:
        async with uow_factory() as uow:
            await uow.audiences.update(replace(world.audience, name="changed"))
            await uow.run_events.append(
                world.workspace.id, run.id, [RunEventDraft(type="RUN_CREATED", occurred_at=NOW)]
            )
            raise Boom

    with pytest.raises(Boom):
        await change_then_fail()

    async with uow_factory() as uow:
        assert (await uow.audiences.get(world.workspace.id, world.audience.id)).name == "customers"
        assert (await uow.runs.get(world.workspace.id, run.id)).last_event_sequence == 0
        assert await uow.run_events.first_sequence(run.id) is None
    with pytest.raises(RuntimeError, match="only usable inside"):
        _ = uow.accounts
