"""Fenced writes from a lease that is no longer current are rejected; artifact retention and downloads."""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection
from dataclasses import replace
from datetime import datetime, timedelta

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.integration.execution._world import (
    World,
    artifacts_of,
    build_world,
    claim_run,
    create_run,
    load_run,
)
from wepush.agent.engine import ItemResult as EngineItemResult
from wepush.agent.engine import ItemState as EngineItemState
from wepush.agent.engine import RunEvent as EngineRunEvent
from wepush.agent.engine import RunEventType
from wepush.server.application.execution import (
    ARTIFACT_KINDS,
    CSV_EXPORT,
    RUN_LOG,
    ArtifactDownloads,
    ArtifactKind,
    ArtifactNotReady,
    ArtifactRetention,
    ByteRange,
    FencedResultSink,
    FencedRunEventSink,
    LeaseGuard,
    RangeNotSatisfiable,
    RetentionPolicy,
    RunArtifactWriter,
    RunLog,
    RunRecovery,
    RunSnapshot,
    SnapshotRecipientSource,
    plain_transactions,
)
from wepush.server.domain import (
    Artifact,
    ArtifactOwnerType,
    ArtifactState,
    ItemState,
    LeaseExpired,
    LeaseFence,
    NotFound,
    Run,
    RunState,
    utc_now,
)
from wepush.server.infra.artifacts import LocalArtifactStore
from wepush.server.infra.db import DatabaseRecoveryLocks, SqlUnitOfWorkFactory, execution_ledger
from wepush.server.infra.secrets import LocalEnvelopeSecretStore


@pytest.fixture
async def world(uow: SqlUnitOfWorkFactory, secret_store: LocalEnvelopeSecretStore) -> World:
    return await build_world(uow, secret_store, recipients=3)


def _result(run: Run, sequence: int, state: EngineItemState = EngineItemState.SUCCEEDED) -> EngineItemResult:
    return EngineItemResult(
        run_id=run.id, item_id=f"item-{sequence}", sequence=sequence, state=state, attempt=1
    )


def _recovery(uow: SqlUnitOfWorkFactory, store: LocalArtifactStore) -> RunRecovery:
    return RunRecovery(uow=uow, artifact_store=store, clock=utc_now)


async def test_a_late_write_from_a_revoked_executor_is_rejected_and_changes_nothing(
    uow: SqlUnitOfWorkFactory, artifact_store: LocalArtifactStore, world: World
) -> None:
    run = await create_run(uow, world)
    claimed = await claim_run(uow, world, run)
    guard = LeaseGuard(uow, claimed.fence, utc_now)
    sink = FencedResultSink(guard, execution_ledger(uow), run.workspace_id, run.id)
    await sink.append([_result(run, 1)])

    recovered = await _recovery(uow, artifact_store).recover_lease(claimed.lease, "the executor died")
    with pytest.raises(LeaseExpired) as rejected:
        await sink.append([_result(run, 2)])

    assert rejected.value.code == "LEASE_EXPIRED"
    assert recovered is not None
    assert recovered.final_state is RunState.PARTIAL
    async with uow(read_only=True) as unit:
        states = await unit.run_items.count_by_state(run.id)
        lease = await unit.leases.get(claimed.lease.id)
    assert states == {ItemState.SUCCEEDED: 1, ItemState.UNSENT: 2}
    assert lease.state.value == "REVOKED"


async def test_only_the_current_epoch_and_token_may_write(
    uow: SqlUnitOfWorkFactory, artifact_store: LocalArtifactStore, world: World
) -> None:
    run = await create_run(uow, world)
    first = await claim_run(uow, world, run)
    # Nothing was dispatched under the first lease, so recovery queues the run again.
    requeued = await _recovery(uow, artifact_store).recover_lease(first.lease, "the executor died")
    assert requeued is not None
    assert requeued.final_state is RunState.PENDING
    second = await claim_run(uow, world, run)
    snapshot = RunSnapshot.from_json((await load_run(uow, run)).snapshot)

    forged = LeaseFence(second.lease.id, first.lease.epoch, first.token)
    for fence in (first.fence, forged, LeaseFence(second.lease.id, second.lease.epoch, first.token)):
        guard = LeaseGuard(uow, fence, utc_now)
        with pytest.raises(LeaseExpired):
            await FencedResultSink(guard, execution_ledger(uow), run.workspace_id, run.id).append(
                [_result(run, 1)]
            )
        # A stale executor may still read, but can hand nothing to a provider: covering a record by the
        # dispatch mark proves the lease.
        stale = SnapshotRecipientSource(uow, guard, snapshot, execution_ledger(uow))
        assert len(await stale.next_batch(10)) == 3
        with pytest.raises(LeaseExpired):
            await stale.cover(1)
        # The run log is written through the same fence, so nothing of a stale executor reaches it either.
        log = RunLog(
            RunArtifactWriter(
                store=artifact_store,
                tx=guard.transaction,
                workspace_id=run.workspace_id,
                run_id=run.id,
                clock=utc_now,
                retention=RetentionPolicy(),
            )
        )
        events = FencedRunEventSink(
            guard, workspace_id=run.workspace_id, run_id=run.id, log=log, clock=utc_now
        )
        with pytest.raises(LeaseExpired):
            await events.publish([EngineRunEvent(run.id, 1, RunEventType.RUN_STARTED, utc_now())])

    assert await artifacts_of(uow, run) == {}
    current = LeaseGuard(uow, second.fence, utc_now)
    source = SnapshotRecipientSource(uow, current, snapshot, execution_ledger(uow))
    batch = await source.next_batch(10)
    await source.cover(batch[0].sequence)
    await FencedResultSink(current, execution_ledger(uow), run.workspace_id, run.id).append([_result(run, 1)])
    async with uow(read_only=True) as unit:
        mark = await unit.runs.dispatch_mark(run.workspace_id, run.id)
    assert (second.lease.epoch, len(batch), mark) == (2, 3, 3)


def _writer(
    uow: SqlUnitOfWorkFactory, store: LocalArtifactStore, run: Run, clock: Callable[[], datetime]
) -> RunArtifactWriter:
    return RunArtifactWriter(
        store=store,
        tx=plain_transactions(uow),
        workspace_id=run.workspace_id,
        run_id=run.id,
        clock=clock,
        retention=RetentionPolicy(),
    )


async def _artifact(
    uow: SqlUnitOfWorkFactory, store: LocalArtifactStore, run: Run, kind: ArtifactKind, age: timedelta
) -> Artifact:
    created = utc_now() - age
    writer = _writer(uow, store, run, lambda: created)
    file = await writer.begin(kind)
    await writer.write(file, b'{"line":1}\n')
    return await writer.finish(file)


class FlakyStore(LocalArtifactStore):
    """Refuses to delete chosen keys once, like an object store having a bad moment."""

    def __init__(self, root: object, fail_once: set[str]) -> None:
        super().__init__(str(root))
        self.fail_once = fail_once

    async def delete(self, key: str) -> bool:
        if key in self.fail_once:
            self.fail_once.discard(key)
            raise OSError("store unavailable")
        return await super().delete(key)


async def test_retention_deletes_what_expired_skips_pinned_and_held_and_can_run_again(
    uow: SqlUnitOfWorkFactory, artifact_store: LocalArtifactStore, world: World
) -> None:
    run = await create_run(uow, world)
    results = ARTIFACT_KINDS[EngineItemState.SUCCEEDED]
    made = {
        "results_old": await _artifact(uow, artifact_store, run, results, timedelta(days=91)),
        "results_recent": await _artifact(uow, artifact_store, run, results, timedelta(days=89)),
        "log_old": await _artifact(uow, artifact_store, run, RUN_LOG, timedelta(days=31)),
        "log_recent": await _artifact(uow, artifact_store, run, RUN_LOG, timedelta(days=29)),
        "export_old": await _artifact(uow, artifact_store, run, CSV_EXPORT, timedelta(hours=25)),
        "export_recent": await _artifact(uow, artifact_store, run, CSV_EXPORT, timedelta(hours=23)),
        "pinned": await _artifact(uow, artifact_store, run, results, timedelta(days=91)),
        "held": await _artifact(uow, artifact_store, run, RUN_LOG, timedelta(days=31)),
        "gone": await _artifact(uow, artifact_store, run, results, timedelta(days=91)),
        "flaky": await _artifact(uow, artifact_store, run, CSV_EXPORT, timedelta(hours=25)),
    }
    async with uow() as unit:
        await unit.artifacts.update(replace(made["pinned"], pinned=True))
        await unit.artifacts.update(replace(made["held"], legal_hold=True))
    await artifact_store.delete(made["gone"].storage_key)
    store = FlakyStore(artifact_store.root, {made["flaky"].storage_key})
    retention = ArtifactRetention(uow, store, utc_now)

    first = await retention.sweep()
    after_first = await _states(uow, made)
    second = await retention.sweep()
    third = await retention.sweep()

    assert (first.deleted, first.missing, first.failed) == (3, 1, 1)
    assert after_first["flaky"] is ArtifactState.DELETING
    assert (second.deleted, second.missing, second.failed) == (1, 0, 0)
    assert (third.deleted, third.missing, third.failed) == (0, 0, 0)
    final = await _states(uow, made)
    deleted = {"results_old", "log_old", "export_old", "gone", "flaky"}
    assert {name for name, state in final.items() if state is ArtifactState.DELETED} == deleted
    assert {name for name, state in final.items() if state is ArtifactState.READY} == set(made) - deleted
    for name, artifact in made.items():
        assert (await artifact_store.stat(artifact.storage_key) is None) == (name in deleted)


class DownStore(LocalArtifactStore):
    """An object store that is down for deletions until ``up``."""

    def __init__(self, root: object) -> None:
        super().__init__(str(root))
        self.up = False
        self.refused = 0

    async def delete(self, key: str) -> bool:
        if not self.up:
            self.refused += 1
            raise OSError("connection refused")
        return await super().delete(key)


async def test_retention_with_the_store_down_stops_claiming_and_logs_its_traceback_once(
    uow: SqlUnitOfWorkFactory,
    artifact_store: LocalArtifactStore,
    world: World,
    caplog: pytest.LogCaptureFixture,
) -> None:
    run = await create_run(uow, world)
    made = {
        f"export-{n}": await _artifact(uow, artifact_store, run, CSV_EXPORT, timedelta(hours=25))
        for n in range(7)
    }
    store = DownStore(artifact_store.root)
    retention = ArtifactRetention(uow, store, utc_now, batch_size=3)
    caplog.set_level(logging.INFO, logger="wepush")

    first = await retention.sweep()
    second = await retention.sweep()
    during = await _states(uow, made)
    store.up = True
    third = await retention.sweep()

    # One batch claimed, not all seven: the others are left READY, not turned DELETING to fail too.
    assert (first.failed, second.failed, store.refused) == (3, 3, 6)
    assert sorted(state.value for state in during.values()) == ["DELETING"] * 3 + ["READY"] * 4
    assert (third.deleted, third.failed) == (7, 0)
    lines = [r for r in caplog.records if getattr(r, "loop", None) == "artifact deletion"]
    assert [(r.levelname, r.exc_info is not None) for r in lines] == [
        ("ERROR", True),  # the first refusal, with its traceback
        ("WARNING", False),  # the same again next pass: one line
        ("INFO", False),  # back
    ]
    assert [getattr(r, "event", None) for r in lines[:2]] == ["ARTIFACT_DELETE_FAILED"] * 2


class RecordingStore(LocalArtifactStore):
    """Remembers which keys the sweep said are in use."""

    def __init__(self, root: object) -> None:
        super().__init__(str(root))
        self.in_use: set[str] | None = None

    async def reclaim_abandoned(self, older_than: timedelta, *, in_use: Collection[str] = ()) -> int:
        self.in_use = set(in_use)
        return await super().reclaim_abandoned(older_than, in_use=in_use)


async def test_retention_tells_the_store_which_uploads_unfinished_runs_still_write(
    uow: SqlUnitOfWorkFactory, artifact_store: LocalArtifactStore, world: World
) -> None:
    run = await create_run(uow, world)  # PENDING: not finished
    writer = _writer(uow, artifact_store, run, utc_now)
    still_writing = await writer.begin(ARTIFACT_KINDS[EngineItemState.SUCCEEDED])
    await writer.write(still_writing, b'{"line":1}\n')
    async with uow(read_only=True) as unit:
        [uploading] = [
            a
            for a in await unit.artifacts.list_for_owner(world.workspace.id, ArtifactOwnerType.RUN, run.id)
            if a.state is ArtifactState.UPLOADING
        ]
    store = RecordingStore(artifact_store.root)

    try:
        await ArtifactRetention(uow, store, utc_now).sweep()
    finally:
        await writer.fail(still_writing)

    assert store.in_use == {uploading.storage_key}


async def _states(uow: SqlUnitOfWorkFactory, made: dict[str, Artifact]) -> dict[str, ArtifactState]:
    async with uow(read_only=True) as unit:
        return {name: (await unit.artifacts.get(a.workspace_id, a.id)).state for name, a in made.items()}


async def test_downloads_refuse_unready_foreign_missing_and_out_of_range_artifacts(
    uow: SqlUnitOfWorkFactory, artifact_store: LocalArtifactStore, world: World
) -> None:
    run = await create_run(uow, world)
    other = await create_run(uow, world)
    ready = await _artifact(uow, artifact_store, run, RUN_LOG, timedelta(0))
    writer = _writer(uow, artifact_store, run, utc_now)
    uploading = await writer.begin(CSV_EXPORT)
    lost = await _artifact(uow, artifact_store, run, CSV_EXPORT, timedelta(0))
    await artifact_store.delete(lost.storage_key)
    downloads = ArtifactDownloads(uow, artifact_store)
    ws = world.workspace.id

    with pytest.raises(ArtifactNotReady) as not_ready:
        await downloads.open_artifact(ws, run.id, uploading.artifact.id)
    with pytest.raises(NotFound):
        await downloads.open_artifact(ws, other.id, ready.id)
    with pytest.raises(NotFound):
        await downloads.open_artifact("another-workspace", run.id, ready.id)
    with pytest.raises(NotFound):
        await downloads.open_artifact(ws, run.id, lost.id)
    with pytest.raises(RangeNotSatisfiable) as outside:
        await downloads.open_artifact(ws, run.id, ready.id, ByteRange(500, None))

    assert not_ready.value.code == "ARTIFACT_NOT_READY"
    assert outside.value.size == ready.size_bytes
    await writer.fail(uploading)


async def test_a_run_another_recoverer_holds_is_left_to_it(
    uow: SqlUnitOfWorkFactory, artifact_store: LocalArtifactStore, world: World, db_engine: AsyncEngine
) -> None:
    """Two instances (one restarting while the other's reaper recovers) must not both settle a run: the
    second would supersede the artifacts the first is writing and race it to the end state."""
    run = await create_run(uow, world)
    claimed = await claim_run(uow, world, run)
    sink = FencedResultSink(
        LeaseGuard(uow, claimed.fence, utc_now), execution_ledger(uow), run.workspace_id, run.id
    )
    await sink.append([_result(run, 1)])
    # Two instances' locks: separate connections on PostgreSQL, one process's registry on SQLite.
    holders, others = DatabaseRecoveryLocks(db_engine), DatabaseRecoveryLocks(db_engine)
    holder = RunRecovery(uow=uow, artifact_store=artifact_store, clock=utc_now, locks=holders)
    other = RunRecovery(uow=uow, artifact_store=artifact_store, clock=utc_now, locks=others)

    async with holders.hold(run.id) as held:
        left = await other.recover_lease(claimed.lease, "the executor died")
        during = await load_run(uow, run)
        written_meanwhile = await artifacts_of(uow, run)
    recovered = await holder.recover_run(during, "the executor died")
    after = await other.recover_run(during, "the executor died")

    assert held
    assert left is None
    assert during.state is RunState.LOST  # the lease was revoked; the settling waits for the holder
    assert written_meanwhile == {}
    assert recovered is not None
    assert recovered.final_state is RunState.PARTIAL
    assert after is None  # the run ended while it waited: nothing is done twice
    assert (await load_run(uow, run)).state is RunState.PARTIAL


async def test_a_recovery_lock_is_the_run_s_alone_and_free_again_once_released(
    db_engine: AsyncEngine,
) -> None:
    first, second = DatabaseRecoveryLocks(db_engine), DatabaseRecoveryLocks(db_engine)
    async with first.hold("run-a") as a, second.hold("run-a") as contended, second.hold("run-b") as b:
        assert (a, contended, b) == (True, False, True)
    async with second.hold("run-a") as again:
        assert again
