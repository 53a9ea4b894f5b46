"""The recipient read of an executing run and its dispatch high-water mark: the read never waits for the
writers recording results, and the mark is durable before the engine receives a batch."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from types import TracebackType
from typing import Any

import pytest

from tests.integration.execution._world import World, build_world, claim_run, create_run, eventually, load_run
from wepush.server.application.execution import (
    LeaseGuard,
    RunSnapshot,
    SnapshotRecipientSource,
    UnitOfWorkLedger,
)
from wepush.server.domain import UnitOfWork, utc_now
from wepush.server.infra.db import SqlUnitOfWorkFactory
from wepush.server.infra.secrets import LocalEnvelopeSecretStore


class _CountedUnit:
    """A unit of work that tells its factory when a read-only transaction has ended."""

    def __init__(self, inner: UnitOfWork, factory: _CountingFactory, read_only: bool) -> None:
        self._inner = inner
        self._factory = factory
        self._read_only = read_only

    async def __aenter__(self) -> UnitOfWork:
        await self._inner.__aenter__()
        return self._inner

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self._inner.__aexit__(exc_type, exc, tb)
        if self._read_only:
            self._factory.reads_done += 1


class _CountingFactory:
    def __init__(self, inner: SqlUnitOfWorkFactory) -> None:
        self._inner = inner
        self.reads_done = 0

    def __call__(self, *, read_only: bool = False) -> Any:
        return _CountedUnit(self._inner(read_only=read_only), self, read_only)

    @property
    def concurrent(self) -> bool:
        return self._inner.concurrent

    @property
    def writers_side_by_side(self) -> bool:
        return self._inner.writers_side_by_side

    def reader_beside_writer(self) -> Any:
        return self._inner.reader_beside_writer()


@pytest.fixture
async def world(uow: SqlUnitOfWorkFactory, secret_store: LocalEnvelopeSecretStore) -> World:
    return await build_world(uow, secret_store, recipients=25)


async def test_recipients_are_read_while_a_writer_holds_the_run_and_handed_out_once_the_mark_is_stored(
    uow: SqlUnitOfWorkFactory, world: World
) -> None:
    run = await create_run(uow, world)
    claimed = await claim_run(uow, world, run)
    snapshot = RunSnapshot.from_json((await load_run(uow, run)).snapshot)
    counting = _CountingFactory(uow)
    guard = LeaseGuard(uow, claimed.fence, utc_now)
    source = SnapshotRecipientSource(counting, guard, snapshot, UnitOfWorkLedger(counting))

    async def mark() -> int:
        async with uow(read_only=True) as unit:
            return await unit.runs.dispatch_mark(run.workspace_id, run.id)

    first = await source.next_batch(10)
    assert [r.sequence for r in first] == list(range(1, 11))
    # Handing out 1..10 raised the mark one batch further, to 20, in the background.
    await eventually(lambda: _equal(mark(), 20), within=5, what="the mark raised ahead")
    # A writer (as a result append would) holds the run: SQLite's write lock, PostgreSQL's row lock.
    async with uow() as writer:
        await writer.runs.mark_dispatched(run.workspace_id, run.id, through_sequence=10)
        # 11..20 are covered already: they are read and handed out while the writer holds the run.
        second = await asyncio.wait_for(source.next_batch(10), timeout=3)
        assert [r.sequence for r in second] == list(range(11, 21))
        reads_before = counting.reads_done
        third = asyncio.create_task(source.next_batch(10))
        # 21..25 are read under the writer too, but wait for their mark (raised ahead to the audience's
        # last sequence, 25), which waits for the writer.
        await eventually(lambda: _true(counting.reads_done > reads_before), within=3, what="the read")
        await asyncio.sleep(0.05)
        assert not third.done()
    assert [r.sequence for r in await third] == list(range(21, 26))
    assert await mark() == 25
    assert list(await source.next_batch(10)) == []
    await source.close()


async def _equal(value: Awaitable[int], expected: int) -> bool:
    return await value == expected


async def _true(value: bool) -> bool:
    return value
