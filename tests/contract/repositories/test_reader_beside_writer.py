"""A reader beside a writer (the import commit's checksum connection) on both databases: callers beyond a
quarter of the pool wait for their turn before taking either connection, so the pool never deadlocks with
every caller holding a reader and waiting for a writer."""

from __future__ import annotations

import asyncio

from sqlalchemy.ext.asyncio import AsyncEngine

from tests.fixtures.db import LOCK_WAIT_DEADLINE_S, SteppingClock
from wepush.server.infra.db import PoolSettings, SqlUnitOfWorkFactory, create_database


async def _most_pairs_at_once(factory: SqlUnitOfWorkFactory, callers: int) -> tuple[int, int]:
    """Run ``callers`` pairs at once, each holding both connections for a moment; the most held at once
    and how many completed."""
    held = most = done = 0
    gate = asyncio.Event()

    async def pair() -> None:
        nonlocal held, most, done
        async with factory.reader_beside_writer() as (reader, writer):
            assert reader is not None
            held += 1
            most = max(most, held)
            await reader.workspaces.find_by_name("default")
            await writer.workspaces.find_by_name("default")
            await gate.wait()
            held -= 1
        done += 1

    tasks = [asyncio.ensure_future(pair()) for _ in range(callers)]
    await asyncio.sleep(0)  # let the first callers take their pairs
    gate.set()
    await asyncio.wait_for(asyncio.gather(*tasks), LOCK_WAIT_DEADLINE_S)  # a deadlock detector
    return most, done


async def _engine(database_url: str, size: int) -> AsyncEngine:
    return create_database(database_url, pool=PoolSettings(size=size, max_overflow=0, timeout_seconds=5))


async def test_pairs_take_at_most_a_quarter_of_the_pool_and_all_complete(
    database_url: str, db_clock: SteppingClock
) -> None:
    engine = await _engine(database_url, 8)
    try:
        most, done = await _most_pairs_at_once(SqlUnitOfWorkFactory(engine, clock=db_clock), callers=12)
    finally:
        await engine.dispose()

    # Two pairs of the pool of eight (SQLite's writers take its write lock one at a time, so there one).
    assert 1 <= most <= 2
    assert done == 12


async def test_a_pool_of_one_connection_gives_no_reader_rather_than_waiting_for_itself(
    database_url: str, db_clock: SteppingClock
) -> None:
    engine = await _engine(database_url, 1)
    try:
        factory = SqlUnitOfWorkFactory(engine, clock=db_clock)

        async def alone() -> bool:
            async with factory.reader_beside_writer() as (reader, writer):
                await writer.workspaces.find_by_name("default")
                return reader is None

        assert await asyncio.wait_for(alone(), LOCK_WAIT_DEADLINE_S)
    finally:
        await engine.dispose()
