"""Every ExecutionLedger behaves like the reference spelled with units of work: the same pages, the same
fence, the same idempotent results, the same rising mark. On SQLite both ledgers are checked."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import timedelta

import pytest

from tests.integration.execution._world import World, build_world, claim_run, create_run
from wepush.agent.engine import ErrorCategory, ItemResult, ItemState
from wepush.server.application.execution import (
    ExecutionLedger,
    RecipientScope,
    UnitOfWorkLedger,
    move_run,
    recipient_record,
)
from wepush.server.domain import (
    RESENDABLE_ITEM_STATES,
    LeaseExpired,
    LeaseFence,
    PageRequest,
    RunState,
    RunStateConflict,
    utc_now,
)
from wepush.server.domain import ItemState as StoredState
from wepush.server.infra.db import SqliteExecutionLedger, SqlUnitOfWorkFactory
from wepush.server.infra.secrets import LocalEnvelopeSecretStore

LedgerFactory = Callable[[SqlUnitOfWorkFactory], ExecutionLedger]


# (database, ledger): the reference ledger on both databases, the loop-side ledger on SQLite, its only
# database. Overriding ``database_backend`` here makes the database follow the case.
LEDGER_CASES = [
    pytest.param(("sqlite", "reference"), id="sqlite-reference"),
    pytest.param(("postgresql", "reference"), id="postgresql-reference", marks=pytest.mark.postgres),
    pytest.param(("sqlite", "loop"), id="sqlite-loop"),
]


@pytest.fixture(params=LEDGER_CASES)
def ledger_case(request: pytest.FixtureRequest) -> tuple[str, str]:
    database, ledger = request.param
    return str(database), str(ledger)


@pytest.fixture
def database_backend(request: pytest.FixtureRequest) -> str:
    if "ledger_case" in request.fixturenames:
        return str(request.getfixturevalue("ledger_case")[0])
    # Tests of SQLite's own locking have no other database.
    return "sqlite"


@pytest.fixture
def make_ledger(ledger_case: tuple[str, str]) -> Iterator[LedgerFactory]:
    if ledger_case[1] == "reference":
        yield UnitOfWorkLedger
        return
    made: list[SqliteExecutionLedger] = []

    def make(uow: SqlUnitOfWorkFactory) -> ExecutionLedger:
        made.append(SqliteExecutionLedger(uow))
        return made[-1]

    yield make
    for ledger in made:
        ledger.close()


@pytest.fixture
async def world(uow: SqlUnitOfWorkFactory, secret_store: LocalEnvelopeSecretStore) -> World:
    return await build_world(uow, secret_store, recipients=12)


def _result(sequence: int, state: ItemState = ItemState.SUCCEEDED, attempt: int = 1) -> ItemResult:
    return ItemResult(
        run_id="run",
        item_id=f"item-{sequence}",
        sequence=sequence,
        state=state,
        attempt=attempt,
        error_category=None if state is ItemState.SUCCEEDED else ErrorCategory.TEMPORARY_REMOTE,
        provider_code="OK" if state is ItemState.SUCCEEDED else "HTTP_503",
        finished_at=utc_now(),
    )


async def test_recipient_pages_follow_the_sequence_and_a_resend_reads_only_its_retry_set(
    uow: SqlUnitOfWorkFactory, world: World, make_ledger: LedgerFactory
) -> None:
    ledger = make_ledger(uow)
    run = await create_run(uow, world)
    scope = RecipientScope(run.workspace_id, run.id, run.audience_snapshot_id, resend=False)
    first = await ledger.read_records(scope, None, 5)
    rest = await ledger.read_records(scope, first.next_after, 100)
    assert [r.sequence for r in first.items] == [1, 2, 3, 4, 5]
    assert first.next_after == 5
    assert [r.sequence for r in rest.items] == list(range(6, 13))
    assert rest.next_after is None
    async with uow(read_only=True) as unit:
        stored = await unit.audiences.list_recipients(run.audience_snapshot_id, _page(5))
    assert first.items == [recipient_record(run.id, r) for r in stored.items]

    claimed = await claim_run(uow, world, run)
    failed = [_result(n, ItemState.FAILED) for n in (2, 7, 11)]
    await ledger.record_results(claimed.fence, utc_now(), run.workspace_id, run.id, failed)
    resend = await create_run(uow, world)
    async with uow() as unit:
        await unit.run_items.create_retry_set(resend.id, run.id, RESENDABLE_ITEM_STATES)
    retry_scope = RecipientScope(resend.workspace_id, resend.id, resend.audience_snapshot_id, resend=True)
    page = await ledger.read_records(retry_scope, None, 2)
    last = await ledger.read_records(retry_scope, page.next_after, 2)
    assert [r.sequence for r in page.items + last.items] == [2, 7, 11]
    assert last.next_after is None


async def test_results_are_recorded_once_and_a_redelivered_batch_changes_nothing_but_newer_attempts(
    uow: SqlUnitOfWorkFactory, world: World, make_ledger: LedgerFactory
) -> None:
    ledger = make_ledger(uow)
    run = await create_run(uow, world)
    claimed = await claim_run(uow, world, run)
    now = utc_now()
    first = [_result(1), _result(2, ItemState.FAILED), _result(3)]
    await ledger.record_results(claimed.fence, now, run.workspace_id, run.id, first)
    async with uow(read_only=True) as unit:
        stored = await unit.run_items.get(run.id, "item-2")
    # The same batch again (a retried append), plus a newer attempt of item 2 and a new item 4.
    again = [*first, _result(2, ItemState.SUCCEEDED, attempt=2), _result(4)]
    await ledger.record_results(claimed.fence, now, run.workspace_id, run.id, again)
    # A stale attempt never overwrites a newer one.
    await ledger.record_results(claimed.fence, now, run.workspace_id, run.id, [_result(2, ItemState.FAILED)])
    async with uow(read_only=True) as unit:
        counts = await unit.run_items.count_by_state(run.id)
        item = await unit.run_items.get(run.id, "item-2")
        page = await unit.run_items.list_page(run.id, _page(10))
    assert counts == {StoredState.SUCCEEDED: 4}
    assert stored is not None
    assert (stored.state, stored.attempt, stored.provider_code) == (StoredState.FAILED, 1, "HTTP_503")
    assert stored.error_category == "TEMPORARY_REMOTE"
    assert stored.finished_at == first[1].finished_at
    assert item is not None
    assert (item.state, item.attempt, item.version) == (StoredState.SUCCEEDED, 2, 2)
    assert [i.sequence for i in page.items] == [1, 2, 3, 4]


async def test_a_vendor_answer_no_column_holds_is_recorded_made_safe(
    uow: SqlUnitOfWorkFactory, world: World, make_ledger: LedgerFactory
) -> None:
    # NUL (PostgreSQL), a lone surrogate (no driver encodes it) or an over-long id (a VARCHAR) used to
    # fail the batch on every retry; each ledger keeps the outcome with the text made safe.
    ledger = make_ledger(uow)
    run = await create_run(uow, world)
    claimed = await claim_run(uow, world, run)
    odd = replace(
        _result(1, ItemState.FAILED),
        provider_code="E\x00" + "c" * 300,
        diagnostic="bad\x00byte \ud800",
        external_request_id="r" * 400,
    )
    await ledger.record_results(claimed.fence, utc_now(), run.workspace_id, run.id, [odd, _result(2)])
    async with uow(read_only=True) as unit:
        item = await unit.run_items.get(run.id, "item-1")
        counts = await unit.run_items.count_by_state(run.id)
    assert counts == {StoredState.FAILED: 1, StoredState.SUCCEEDED: 1}
    assert item is not None
    assert item.diagnostic == "bad\ufffdbyte \ufffd"
    assert item.provider_code == "E\ufffd" + "c" * 125 + "…"
    assert item.external_request_id == "r" * 255 + "…"


async def test_the_mark_only_rises_and_every_write_proves_the_fence(
    uow: SqlUnitOfWorkFactory, world: World, make_ledger: LedgerFactory
) -> None:
    ledger = make_ledger(uow)
    run = await create_run(uow, world)
    claimed = await claim_run(uow, world, run)
    now = utc_now()
    await ledger.mark_dispatched(claimed.fence, now, run.workspace_id, run.id, 10)
    await ledger.mark_dispatched(claimed.fence, now, run.workspace_id, run.id, 4)
    async with uow(read_only=True) as unit:
        assert await unit.runs.dispatch_mark(run.workspace_id, run.id) == 10

    forged = LeaseFence(claimed.lease.id, claimed.lease.epoch + 1, claimed.token)
    expired_at = claimed.lease.expires_at + timedelta(seconds=1)
    for fence, at in ((forged, now), (claimed.fence, expired_at)):
        with pytest.raises(LeaseExpired):
            await ledger.mark_dispatched(fence, at, run.workspace_id, run.id, 12)
        with pytest.raises(LeaseExpired):
            await ledger.record_results(fence, at, run.workspace_id, run.id, [_result(1)])
    async with uow(read_only=True) as unit:
        assert await unit.runs.dispatch_mark(run.workspace_id, run.id) == 10
        assert await unit.run_items.count_by_state(run.id) == {}

    async with uow() as unit:
        assert await move_run(unit, run.workspace_id, run.id, RunState.FAILED) is RunState.FAILED
    with pytest.raises(RunStateConflict):
        await ledger.mark_dispatched(claimed.fence, now, run.workspace_id, run.id, 12)


def _page(limit: int) -> PageRequest[int]:
    return PageRequest(limit=limit)


async def test_the_sqlite_ledger_waits_for_the_write_lock_without_blocking_the_loop(
    uow: SqlUnitOfWorkFactory, world: World, database_backend: str
) -> None:
    assert database_backend == "sqlite"
    ledger = SqliteExecutionLedger(uow)
    run = await create_run(uow, world)
    claimed = await claim_run(uow, world, run)
    try:
        async with uow() as writer:  # BEGIN IMMEDIATE: this connection holds the write lock
            await writer.runs.get(run.workspace_id, run.id)
            marking = asyncio.create_task(
                ledger.mark_dispatched(claimed.fence, utc_now(), run.workspace_id, run.id, 7)
            )
            # Blocking on the lock would stall the loop (and this writer with it) until the busy timeout
            # failed the mark; instead the ledger yields and tries again while the loop keeps turning.
            for _ in range(20):
                await asyncio.sleep(0.005)
            assert not marking.done()
        await marking
    finally:
        ledger.close()
    async with uow(read_only=True) as unit:
        assert await unit.runs.dispatch_mark(run.workspace_id, run.id) == 7
