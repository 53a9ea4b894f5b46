"""The recipient read of an executing run and its dispatch high-water mark: the read never waits for the
writers recording results and raises no mark; the mark is durable before a record starts and follows
dispatch closely, so a recovery takes only about what was dispatched for possibly sent."""

from __future__ import annotations

import asyncio

import pytest

from tests.helpers_uow import InterceptedUnit, InterceptingUnitOfWork
from tests.integration.execution._world import World, build_world, claim_run, create_run, load_run
from wepush.agent.engine import ItemResult as EngineItemResult
from wepush.agent.engine import ItemState as EngineItemState
from wepush.agent.engine import RecipientRecord
from wepush.server.application.execution import (
    FencedResultSink,
    LeaseGuard,
    RunRecovery,
    RunSnapshot,
    SnapshotRecipientSource,
    UnitOfWorkLedger,
)
from wepush.server.domain import ItemState, utc_now
from wepush.server.infra.artifacts import LocalArtifactStore
from wepush.server.infra.db import SqlUnitOfWorkFactory, execution_ledger
from wepush.server.infra.secrets import LocalEnvelopeSecretStore


class _CountingFactory(InterceptingUnitOfWork):
    """The unit of work, counting the read-only transactions that have ended."""

    def __init__(self, inner: SqlUnitOfWorkFactory) -> None:
        super().__init__(inner)
        self.reads_done = 0

    async def after(self, unit: InterceptedUnit, *, committed: bool) -> None:
        if unit.read_only:
            self.reads_done += 1


@pytest.fixture
async def world(uow: SqlUnitOfWorkFactory, secret_store: LocalEnvelopeSecretStore) -> World:
    return await build_world(uow, secret_store, recipients=25)


async def test_recipients_are_read_while_a_writer_holds_the_run_and_only_a_record_to_start_waits_for_a_mark(
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
    # Reading marks nothing: the mark follows what starts, not what is read.
    assert await mark() == 0
    assert not source.covers(1)
    await source.cover(1)
    # One chunk, at most a read batch: 1..10.
    assert await mark() == 10
    assert all(source.covers(s) for s in range(2, 5))
    # A writer (as a result append would) holds the run: SQLite's write lock, PostgreSQL's row lock.
    async with uow() as writer:
        await writer.runs.mark_dispatched(run.workspace_id, run.id, through_sequence=10)
        reads_before = counting.reads_done
        # The rest of the audience is read under the writer, and raises no mark.
        second = await asyncio.wait_for(source.next_batch(10), timeout=3)
        third = await asyncio.wait_for(source.next_batch(10), timeout=3)
        assert [r.sequence for r in [*second, *third]] == list(range(11, 26))
        assert counting.reads_done == reads_before + 2
        assert await mark() == 10
        # 10 is covered; starting it passes the middle of 1..10, which raises 11..20 in the background.
        assert source.covers(10)
        # 11 has to wait for that raise, which waits for the writer.
        assert not source.covers(11)
        waiting = asyncio.create_task(source.cover(11))
        await asyncio.sleep(0.05)
        assert not waiting.done()
    await asyncio.wait_for(waiting, timeout=5)
    assert await mark() == 20
    assert list(await source.next_batch(10)) == []
    await source.close()


async def test_a_run_recovered_mid_way_counts_as_unknown_only_about_what_was_dispatched(
    uow: SqlUnitOfWorkFactory, secret_store: LocalEnvelopeSecretStore, artifact_store: LocalArtifactStore
) -> None:
    # QA's run: 3,003 recipients sent 50 a second (ten at a time, 0.2 s per answer), the Service killed
    # after 378 requests, ten of them still unanswered. The engine reads up to a batch ahead of dispatch.
    world = await build_world(uow, secret_store, recipients=3003)
    run = await create_run(uow, world)
    claimed = await claim_run(uow, world, run)
    snapshot = RunSnapshot.from_json((await load_run(uow, run)).snapshot)
    guard = LeaseGuard(uow, claimed.fence, utc_now)
    ledger = execution_ledger(uow)
    clock = [0.0]
    source = SnapshotRecipientSource(uow, guard, snapshot, ledger, monotonic=lambda: clock[0])
    queue: list[RecipientRecord] = []
    started: list[RecipientRecord] = []
    while len(started) < 378:
        if len(queue) <= 500:
            queue += await source.next_batch(500)
        record = queue.pop(0)
        clock[0] += 1 / 50
        if not source.covers(record.sequence):
            await source.cover(record.sequence)
        started.append(record)
        await asyncio.sleep(0)
    answered = [
        EngineItemResult(run.id, r.item_id, r.sequence, EngineItemState.SUCCEEDED, 1) for r in started[:-10]
    ]
    await FencedResultSink(guard, ledger, run.workspace_id, run.id).append(answered)
    await source.close()  # a mark already on its way to the database lands before the crash
    read = started[-1].sequence + len(queue)
    assert read >= 1000

    recovered = await RunRecovery(uow=uow, artifact_store=artifact_store, clock=utc_now).recover_lease(
        claimed.lease, "the Service was killed"
    )

    assert recovered is not None
    counts = recovered.counts
    async with uow(read_only=True) as unit:
        mark = await unit.runs.dispatch_mark(run.workspace_id, run.id)
        states = await unit.run_items.count_by_state(run.id)
    # Every request that may have reached the vendor is UNKNOWN, never UNSENT; beyond them only up to about
    # a second and a half of sending is (when the mark followed reads: 1,500 - 368 = 1,132 UNKNOWN).
    assert 378 <= mark <= 378 + 75
    assert (counts.total, counts.succeeded, counts.unknown) == (3003, 368, mark - 368)
    assert counts.unsent == 3003 - mark
    assert states == {ItemState.SUCCEEDED: 368, ItemState.UNKNOWN: mark - 368, ItemState.UNSENT: 3003 - mark}
