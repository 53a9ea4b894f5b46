"""The run's dispatch high-water mark as ``SnapshotRecipientSource`` keeps it: raised as records start, in
chunks of about a second of the dispatch pace, one chunk ahead in the background, never for records only
read; a failed raise fails the record that needs it. A scripted ledger and a stepped clock stand in for the
database and time."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import datetime
from typing import cast

import pytest

from wepush.agent.engine import ItemResult as EngineItemResult
from wepush.agent.engine import RecipientRecord
from wepush.server.application.execution import (
    AccountSnapshot,
    AudienceRef,
    LeaseGuard,
    MessageSnapshot,
    ProviderPin,
    RecipientScope,
    ResendOf,
    RunSnapshot,
    SnapshotRecipientSource,
)
from wepush.server.domain import (
    FencingToken,
    ItemState,
    LeaseExpired,
    LeaseFence,
    Page,
    RunTrigger,
    UnitOfWorkFactory,
    utc_now,
)

BATCH = 500
FENCE = LeaseFence("lease-1", 1, FencingToken("token-1"))


class ScriptedLedger:
    """Serves ``sequences`` as recipient records and stores marks; a mark write takes one loop turn, and
    from the ``fail_from``-th write on the lease is gone."""

    def __init__(self, sequences: Sequence[int], *, fail_from: int | None = None) -> None:
        self._sequences = list(sequences)
        self._fail_from = fail_from
        self.marks: list[int] = []

    @property
    def mark(self) -> int:
        return max(self.marks, default=0)

    async def read_records(
        self, scope: RecipientScope, after: int | None, limit: int
    ) -> Page[RecipientRecord, int]:
        rest = [s for s in self._sequences if after is None or s > after]
        page = [RecipientRecord.of(f"item-{s}", s) for s in rest[:limit]]
        return Page(page, page[-1].sequence if len(rest) > limit else None)

    async def mark_dispatched(
        self, fence: LeaseFence, now: datetime, workspace_id: str, run_id: str, through_sequence: int
    ) -> None:
        await asyncio.sleep(0)
        if self._fail_from is not None and len(self.marks) + 1 >= self._fail_from:
            raise LeaseExpired(fence.lease_id)
        self.marks.append(through_sequence)

    async def record_results(
        self,
        fence: LeaseFence,
        now: datetime,
        workspace_id: str,
        run_id: str,
        results: Sequence[EngineItemResult],
    ) -> None:
        raise AssertionError("not used here")


class SteppedClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _snapshot(count: int, *, resend: bool = False) -> RunSnapshot:
    return RunSnapshot(
        run_id="run-1",
        workspace_id="ws-1",
        job_id="job-1",
        trigger=RunTrigger.RESEND if resend else RunTrigger.MANUAL,
        dry_run=False,
        provider=ProviderPin("wepush.fake", "1.0.0"),
        account=AccountSnapshot("acc-1", 1, "1", {}),
        message=MessageSnapshot("msg-1", 1, "1", {}),
        audience=AudienceRef("snap-1", count),
        policies={},
        resend_of=ResendOf("run-0", (ItemState.UNKNOWN,)) if resend else None,
    )


def _source(ledger: ScriptedLedger, snapshot: RunSnapshot, clock: SteppedClock) -> SnapshotRecipientSource:
    guard = LeaseGuard(cast(UnitOfWorkFactory, object()), FENCE, utc_now)
    return SnapshotRecipientSource(
        cast(UnitOfWorkFactory, object()), guard, snapshot, ledger, monotonic=clock
    )


class Dispatch:
    """Starts records the way the engine does: read a batch ahead whenever no more than a batch waits, ask
    ``covers`` before each start and await ``cover`` when the answer is no."""

    def __init__(self, source: SnapshotRecipientSource, ledger: ScriptedLedger, clock: SteppedClock) -> None:
        self._source = source
        self._ledger = ledger
        self._clock = clock
        self._queue: list[RecipientRecord] = []
        self.started = 0
        self.waited: list[int] = []
        self.leads: list[int] = []
        """Records between each one started and the stored mark at that moment."""

    async def start(self, records: int, *, per_second: float) -> None:
        for _ in range(records):
            if len(self._queue) <= BATCH:
                self._queue += await self._source.next_batch(BATCH)
            record = self._queue.pop(0)
            self._clock.now += 1 / per_second
            if not self._source.covers(record.sequence):
                self.waited.append(record.sequence)
                await self._source.cover(record.sequence)
            mark = self._ledger.mark
            assert record.sequence <= mark, "a record started before the mark covered it"
            self.leads.append(sum(1 for r in self._queue if r.sequence <= mark))
            self.started += 1
            # The provider call: the loop turns, and a raise in the background may land meanwhile.
            await asyncio.sleep(0)
            await asyncio.sleep(0)


async def test_the_mark_follows_dispatch_a_second_of_sending_ahead_and_dispatch_waits_only_at_first() -> None:
    # QA's run: 3,003 recipients, 50 sends a second (ten at a time, 0.2 s per answer).
    ledger, clock = ScriptedLedger(range(1, 3004)), SteppedClock()
    source = _source(ledger, _snapshot(3003), clock)
    dispatch = Dispatch(source, ledger, clock)

    await dispatch.start(378, per_second=50)

    assert dispatch.waited == [1]
    # The first chunk is the floor (32); then each covers the 50 records of a second, raised as dispatch
    # passes the middle of the one before, so the mark leads by half a chunk to one and a half.
    assert ledger.marks[0] == 32
    assert {b - a for a, b in zip(ledger.marks[1:], ledger.marks[2:], strict=False)} == {50}
    assert max(dispatch.leads) <= 75
    assert ledger.mark - 378 <= 75
    await source.close()


@pytest.mark.parametrize(("per_second", "chunk"), [(0.2, 1), (2, 2), (50, 50), (400, 400), (100_000, BATCH)])
async def test_a_chunk_is_a_second_of_sending_within_one_record_and_a_read_batch(
    per_second: float, chunk: int
) -> None:
    ledger, clock = ScriptedLedger(range(1, 5001)), SteppedClock()
    source = _source(ledger, _snapshot(5000), clock)
    dispatch = Dispatch(source, ledger, clock)

    await dispatch.start(2500, per_second=per_second)

    assert ledger.marks[-1] - ledger.marks[-2] == chunk
    await source.close()


async def test_a_slow_run_keeps_its_mark_a_few_records_ahead_so_a_crash_counts_few_as_possibly_sent() -> None:
    # Two sends a second: after a crash, recovery counts those at or below the mark (and in flight) as
    # UNKNOWN. A fixed floor of 32 records left up to 48 possibly-sent behind; a second of sending is 2.
    ledger, clock = ScriptedLedger(range(1, 1001)), SteppedClock()
    source = _source(ledger, _snapshot(1000), clock)
    dispatch = Dispatch(source, ledger, clock)

    await dispatch.start(200, per_second=2)

    assert ledger.marks[0] == 32  # no pace known yet: the first chunk covers a start's burst
    assert ledger.mark - dispatch.started <= 3
    # ... and it still writes about once a second, not once a record.
    assert len(ledger.marks) <= 1 + (200 - 32) / 2 + 1
    await source.close()


async def test_a_resend_set_is_covered_record_by_record_not_by_its_sequence_numbers() -> None:
    # A retry set: every seventh recipient of the snapshot.
    ledger, clock = ScriptedLedger(range(7, 7 * 1200 + 1, 7)), SteppedClock()
    source = _source(ledger, _snapshot(1200, resend=True), clock)
    dispatch = Dispatch(source, ledger, clock)

    await dispatch.start(900, per_second=50)

    assert dispatch.waited == [7]
    assert max(dispatch.leads) <= 76
    # Never beyond what was read: nothing beyond it can have been dispatched.
    assert ledger.mark <= 7 * 1200
    await source.close()


async def test_reading_ahead_leaves_the_mark_alone_and_a_record_waits_for_its_mark() -> None:
    ledger, clock = ScriptedLedger(range(1, 2001)), SteppedClock()
    source = _source(ledger, _snapshot(2000), clock)
    for _ in range(3):
        await source.next_batch(BATCH)
    assert ledger.marks == []  # a paused run reads ahead, yet nothing is marked until a record starts

    assert not source.covers(1)
    waiting = asyncio.create_task(source.cover(1))
    assert not waiting.done()
    await waiting
    assert ledger.marks == [32]
    assert all(source.covers(s) for s in range(2, 16))
    assert ledger.marks == [32]
    await source.close()


async def test_a_raise_that_fails_in_the_background_fails_the_first_record_that_needs_it() -> None:
    ledger, clock = ScriptedLedger(range(1, 1001), fail_from=2), SteppedClock()
    source = _source(ledger, _snapshot(1000), clock)
    dispatch = Dispatch(source, ledger, clock)

    with pytest.raises(LeaseExpired):
        await dispatch.start(100, per_second=50)

    # Everything the first mark covered started; the first record beyond it did not.
    assert ledger.marks == [32]
    assert dispatch.started == 32
    assert dispatch.waited == [1, 33]
    with pytest.raises(LeaseExpired):
        await source.cover(33)
    await source.close()
