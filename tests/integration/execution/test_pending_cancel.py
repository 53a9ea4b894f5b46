"""A run cancelled while PENDING: the request moves it to CANCELLING at once, and the Service then records
every recipient UNSENT in batches of short transactions and ends it CANCELLED (seed: a cancel enters
CANCELLING first, records what was never dispatched UNSENT, and is CANCELLED once every result is flushed).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.integration.execution._world import (
    World,
    artifacts_of,
    build_world,
    claim_run,
    create_run,
    events_of,
    load_run,
    types_of,
)
from wepush.server.application._run_commands import CommandRequest, accept_command
from wepush.server.application.execution import RunRecovery, move_run
from wepush.server.domain import (
    ArtifactOwnerType,
    ArtifactState,
    ItemState,
    PageRequest,
    Run,
    RunCommandType,
    RunState,
    utc_now,
)
from wepush.server.infra.artifacts import LocalArtifactStore
from wepush.server.infra.db import DatabaseRecoveryLocks, SqlUnitOfWorkFactory
from wepush.server.infra.secrets import LocalEnvelopeSecretStore

RECIPIENTS = 23


@pytest.fixture
async def world(uow: SqlUnitOfWorkFactory, secret_store: LocalEnvelopeSecretStore) -> World:
    return await build_world(uow, secret_store, recipients=RECIPIENTS)


def _recovery(uow: SqlUnitOfWorkFactory, store: LocalArtifactStore) -> RunRecovery:
    # Smaller than the audience: the items are written over several transactions.
    return RunRecovery(uow=uow, artifact_store=store, clock=utc_now, batch_size=5)


async def _cancel(uow: SqlUnitOfWorkFactory, run: Run, reason: str | None = "wrong list") -> None:
    async with uow() as unit:
        accepted = await accept_command(
            unit, run.workspace_id, run.id, CommandRequest(RunCommandType.CANCEL, reason=reason), utc_now()
        )
    assert accepted.applied_by_service


async def test_the_pass_ends_a_run_cancelled_before_start_with_every_recipient_unsent(
    uow: SqlUnitOfWorkFactory, artifact_store: LocalArtifactStore, world: World
) -> None:
    run = await create_run(uow, world)
    await _cancel(uow, run)
    cancelling = await load_run(uow, run)

    recovery = _recovery(uow, artifact_store)
    ended = await recovery.finish_cancelled_runs()
    again = await recovery.finish_cancelled_runs()

    finished = await load_run(uow, run)
    async with uow(read_only=True) as unit:
        items = await unit.run_items.list_page(run.id, PageRequest(limit=100))
    assert (cancelling.state, cancelling.cancelled_before_start) == (RunState.CANCELLING, True)
    assert (ended, again) == (1, 0)
    assert (finished.state, finished.state_reason) == (RunState.CANCELLED, "wrong list")
    assert (finished.counts.total, finished.counts.unsent) == (RECIPIENTS, RECIPIENTS)
    assert finished.started_at is None
    assert finished.ended_at is not None
    # Like the engine's UNSENT after a cancel: nothing attempted, no provider code.
    assert [(i.sequence, i.state, i.attempt, i.provider_code) for i in items.items] == [
        (n, ItemState.UNSENT, 0, None) for n in range(1, RECIPIENTS + 1)
    ]
    assert {"UNSENT_ITEMS", "RUN_LOG"} <= set(await artifacts_of(uow, run))
    events = await events_of(uow, run)
    assert types_of(events) == ["RUN_CREATED", "RUN_CANCELLING", "COMMAND_ACKNOWLEDGED", "RUN_COMPLETED"]
    assert events[-1].data["stopReason"] == "CANCELLED"
    assert events[-1].data["recovered"] is False


async def test_an_agent_s_orphan_scan_ends_it_as_a_cancel_not_as_a_lost_run(
    uow: SqlUnitOfWorkFactory, artifact_store: LocalArtifactStore, world: World
) -> None:
    run = await create_run(uow, world)
    await _cancel(uow, run, reason=None)

    # What the embedded agent's reaper does for every executing state without an active lease.
    outcome = await _recovery(uow, artifact_store).recover_orphan(run.workspace_id, run.id, "lease expired")

    finished = await load_run(uow, run)
    assert outcome is not None
    assert (outcome.final_state, outcome.unsent_added) == (RunState.CANCELLED, RECIPIENTS)
    assert finished.state_reason == "Cancelled before any agent started it."
    assert "RUN_LOST" not in types_of(await events_of(uow, run))


async def test_a_run_queued_again_by_a_recovery_is_cancelled_before_start_too(
    uow: SqlUnitOfWorkFactory, artifact_store: LocalArtifactStore, world: World
) -> None:
    run = await create_run(uow, world)
    claimed = await claim_run(uow, world, run)
    async with uow() as unit:
        await move_run(unit, run.workspace_id, run.id, RunState.RUNNING)
    started = await load_run(uow, run)
    recovery = _recovery(uow, artifact_store)
    # Its executor died before dispatching anything: queued again, not started any more.
    requeued = await recovery.recover_lease(claimed.lease, "the executor died")
    await _cancel(uow, run)
    ended = await recovery.finish_cancelled_runs()

    finished = await load_run(uow, run)
    assert started.started_at is not None
    assert requeued is not None
    assert requeued.final_state is RunState.PENDING
    assert ended == 1
    assert (finished.state, finished.counts.unsent) == (RunState.CANCELLED, RECIPIENTS)


async def test_a_pass_interrupted_half_way_is_finished_by_the_next_one(
    uow: SqlUnitOfWorkFactory, artifact_store: LocalArtifactStore, world: World
) -> None:
    run = await create_run(uow, world)
    await _cancel(uow, run)

    class Interrupted(Exception):
        pass

    def dying_clock_after(calls: int) -> Callable[[], datetime]:
        count = 0

        def clock() -> datetime:
            nonlocal count
            count += 1
            if count > calls:
                raise Interrupted
            return utc_now()

        return clock

    # The process stops after a few batches were written (the clock is read once per batch and artifact).
    dying = RunRecovery(uow=uow, artifact_store=artifact_store, clock=dying_clock_after(4), batch_size=5)
    with pytest.raises(Interrupted):
        await dying.finish_cancelled_runs()
    async with uow(read_only=True) as unit:
        partial = await unit.run_items.count_by_state(run.id)
    assert (await load_run(uow, run)).state is RunState.CANCELLING

    ended = await _recovery(uow, artifact_store).finish_cancelled_runs()

    finished = await load_run(uow, run)
    async with uow(read_only=True) as unit:
        items = await unit.run_items.count_by_state(run.id)
    assert 0 < sum(partial.values()) < RECIPIENTS
    assert ended == 1
    assert finished.state is RunState.CANCELLED
    assert items == {ItemState.UNSENT: RECIPIENTS}
    assert (await artifacts_of(uow, run))["UNSENT_ITEMS"].state.value == "READY"


async def test_two_instances_passing_at_once_end_the_run_once(
    uow: SqlUnitOfWorkFactory, artifact_store: LocalArtifactStore, world: World, db_engine: AsyncEngine
) -> None:
    """Every Service instance runs the pass: two of them must not both write the run's items, files and
    RUN_COMPLETED. Each holds its own locks (separate connections on PostgreSQL)."""
    run = await create_run(uow, world)
    await _cancel(uow, run)
    first, second = (
        RunRecovery(
            uow=uow,
            artifact_store=artifact_store,
            clock=utc_now,
            batch_size=5,
            locks=DatabaseRecoveryLocks(db_engine),
        )
        for _ in range(2)
    )

    ended = await asyncio.gather(first.finish_cancelled_runs(), second.finish_cancelled_runs())

    finished = await load_run(uow, run)
    async with uow(read_only=True) as unit:
        artifacts = await unit.artifacts.list_for_owner(run.workspace_id, ArtifactOwnerType.RUN, run.id)
    assert sorted(ended) == [0, 1]
    assert (finished.state, finished.counts.unsent) == (RunState.CANCELLED, RECIPIENTS)
    assert types_of(await events_of(uow, run)).count("RUN_COMPLETED") == 1
    # One set of files, none superseded by a second writer.
    assert sorted(a.artifact_type for a in artifacts) == ["RESULTS_EXPORT", "RUN_LOG", "UNSENT_ITEMS"]
    assert {a.state for a in artifacts} == {ArtifactState.READY}
