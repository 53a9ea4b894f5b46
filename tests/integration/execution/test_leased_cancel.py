"""A cancel accepted while the run is LEASED (claimed, its engine not started yet) waits for the agent and
is applied as soon as the engine runs: "start, then cancel at once" is never refused and never missed."""

from __future__ import annotations

import asyncio

import pytest

from tests.integration.execution._world import (
    World,
    artifacts_of,
    build_world,
    claim_run,
    create_run,
    events_of,
    jsonl,
    load_run,
    types_of,
)
from wepush.agent.engine import EngineOptions, ExecutionEngine, ProviderResult, ThreadSafetyMode
from wepush.agent.providers.catalog import ProviderCatalog
from wepush.agent.providers.fake import FakeProviderFactory, Hang
from wepush.server.application._run_commands import AcceptedCommand, CommandRequest, accept_command
from wepush.server.application.execution import (
    ExecutionContext,
    RecoveryOutcome,
    RunExecution,
    RunRecovery,
    item_id_for,
    move_run,
)
from wepush.server.domain import (
    ClaimedLease,
    ItemResult,
    ItemState,
    Run,
    RunCommand,
    RunCommandState,
    RunCommandType,
    RunState,
    RunStateConflict,
    utc_now,
)
from wepush.server.infra.artifacts import LocalArtifactStore
from wepush.server.infra.db import SqlUnitOfWorkFactory
from wepush.server.infra.secrets import LocalEnvelopeSecretStore


@pytest.fixture
async def world(uow: SqlUnitOfWorkFactory, secret_store: LocalEnvelopeSecretStore) -> World:
    return await build_world(
        uow,
        secret_store,
        recipients=20,
        policies={"concurrency": {"min": 1, "max": 2, "target": 1}, "retry": {"maxAttempts": 1}},
    )


async def _leased_and_cancelled(
    uow: SqlUnitOfWorkFactory, world: World
) -> tuple[Run, ClaimedLease, AcceptedCommand]:
    """A run an agent has claimed but not started, and an operator's cancel accepted for it."""
    run = await create_run(uow, world)
    claimed = await claim_run(uow, world, run)
    async with uow() as unit:
        # Before, 409 RUN_STATE_CONFLICT with no allowed command: the run then sent to everyone.
        accepted = await accept_command(
            unit,
            run.workspace_id,
            run.id,
            CommandRequest(RunCommandType.CANCEL, reason="wrong audience"),
            utc_now(),
        )
    return run, claimed, accepted


async def _recover_dead_agent(
    uow: SqlUnitOfWorkFactory, store: LocalArtifactStore, claimed: ClaimedLease, accepted: AcceptedCommand
) -> tuple[RecoveryOutcome | None, Run, RunCommand | None, dict[ItemState, int]]:
    """Recover the run after its agent died; the run, its cancel command and its item counts after."""
    recovered = await RunRecovery(uow=uow, artifact_store=store, clock=utc_now).recover_lease(
        claimed.lease, "the executor died"
    )
    async with uow(read_only=True) as unit:
        finished = await unit.runs.get(claimed.lease.workspace_id, claimed.lease.run_id)
        command = await unit.run_commands.get_by_command_id(accepted.command.command_id)
        items = await unit.run_items.count_by_state(claimed.lease.run_id)
    return recovered, finished, command, items


async def test_a_cancel_accepted_while_leased_is_applied_once_the_engine_runs(
    uow: SqlUnitOfWorkFactory,
    artifact_store: LocalArtifactStore,
    secret_store: LocalEnvelopeSecretStore,
    world: World,
) -> None:
    run, claimed, accepted = await _leased_and_cancelled(uow, world)
    async with uow() as unit:
        with pytest.raises(RunStateConflict) as paused:
            await accept_command(
                unit, run.workspace_id, run.id, CommandRequest(RunCommandType.PAUSE), utc_now()
            )
    # The first item succeeds, every later one waits until it is cancelled: the run is busy when it arrives.
    provider = FakeProviderFactory(
        outcome=lambda request: ProviderResult.ok() if request.recipient.sequence <= 1 else Hang(),
        thread_safety=ThreadSafetyMode.THREAD_SAFE,
    )
    context = ExecutionContext(
        uow=uow,
        engine=ExecutionEngine(ProviderCatalog.from_factories([provider]).get, EngineOptions()),
        artifact_store=artifact_store,
        secret_store=secret_store,
        clock=utc_now,
    )
    execution = RunExecution(context, claimed, await load_run(uow, run))
    running = asyncio.create_task(execution.execute())
    # What the agent's command poller does: offer the stored command until the engine has started.
    async with asyncio.timeout(30):
        for _ in range(3000):
            if await execution.deliver(accepted.command):
                break
            await asyncio.sleep(0.01)
        await running

    finished = await load_run(uow, run)
    async with uow(read_only=True) as unit:
        command = await unit.run_commands.get_by_command_id(accepted.command.command_id)
    assert accepted.applied_by_service is False
    assert paused.value.allowed_commands == (RunCommandType.CANCEL,)
    assert finished.state is RunState.CANCELLED
    assert finished.state_reason == "wrong audience"
    counts = finished.counts
    assert counts.total == counts.succeeded + counts.failed + counts.unknown + counts.unsent + counts.skipped
    assert counts.unsent > 0
    assert command is not None
    assert command.state is RunCommandState.APPLIED


async def test_a_leased_run_whose_agent_died_with_a_cancel_waiting_is_cancelled_not_queued_again(
    uow: SqlUnitOfWorkFactory, artifact_store: LocalArtifactStore, world: World
) -> None:
    run, claimed, accepted = await _leased_and_cancelled(uow, world)

    # The agent never started the run. Requeued, the next agent would send before it applied the cancel.
    recovered, finished, command, items = await _recover_dead_agent(uow, artifact_store, claimed, accepted)
    assert recovered is not None
    assert recovered.final_state is RunState.CANCELLED
    assert (finished.state, finished.state_reason) == (RunState.CANCELLED, "wrong audience")
    assert (finished.counts.total, finished.counts.unsent) == (20, 20)
    assert command is not None
    assert command.state is RunCommandState.APPLIED
    # Every recipient has its outcome as an item and in the UNSENT file, so a resend finds all 20.
    assert items == {ItemState.UNSENT: 20}
    unsent = (await artifacts_of(uow, run))["UNSENT_ITEMS"]
    assert unsent.size_bytes is not None
    chunks = await artifact_store.open_range(unsent.storage_key, 0, unsent.size_bytes)
    assert len(jsonl(b"".join([chunk async for chunk in chunks]))) == 20
    events = await events_of(uow, run)
    acknowledged = [e for e in events if e.type == "COMMAND_ACKNOWLEDGED"]
    assert [e.data["commandId"] for e in acknowledged] == [accepted.command.command_id]
    assert types_of(events)[-1] == "RUN_COMPLETED"


async def test_a_cancelling_run_whose_agent_died_before_dispatching_records_every_recipient_unsent(
    uow: SqlUnitOfWorkFactory, artifact_store: LocalArtifactStore, world: World
) -> None:
    run = await create_run(uow, world)
    claimed = await claim_run(uow, world, run)
    async with uow() as unit:
        # Started, then cancelled by the operator: the agent reported CANCELLING, then died.
        await move_run(unit, run.workspace_id, run.id, RunState.CANCELLING, reason="operator")

    recovered = await RunRecovery(uow=uow, artifact_store=artifact_store, clock=utc_now).recover_lease(
        claimed.lease, "the executor died"
    )

    finished = await load_run(uow, run)
    async with uow(read_only=True) as unit:
        items = await unit.run_items.count_by_state(run.id)
    assert recovered is not None
    assert (recovered.final_state, recovered.unsent_added) == (RunState.CANCELLED, 20)
    assert finished.state is RunState.CANCELLED
    assert (finished.counts.total, finished.counts.unsent) == (20, 20)
    # Before, only the counts said UNSENT: the item pages were empty and a resend found nothing.
    assert items == {ItemState.UNSENT: 20}


async def test_a_running_run_whose_agent_died_with_a_cancel_waiting_ends_cancelled(
    uow: SqlUnitOfWorkFactory, artifact_store: LocalArtifactStore, world: World
) -> None:
    """The operator asked to stop; the agent died before it applied the command. Recovery sends nothing
    more either way, so it carries the cancel out instead of refusing it and ending the run FAILED."""
    run = await create_run(uow, world)
    claimed = await claim_run(uow, world, run)
    async with uow() as unit:
        await move_run(unit, run.workspace_id, run.id, RunState.RUNNING)
        await unit.runs.mark_dispatched(run.workspace_id, run.id, through_sequence=3)
        await unit.run_items.record_results(
            run.workspace_id,
            run.id,
            [
                ItemResult(
                    item_id=item_id_for(run.id, run.audience_snapshot_id, 1),
                    sequence=1,
                    state=ItemState.SUCCEEDED,
                    attempt=1,
                )
            ],
        )
        accepted = await accept_command(
            unit,
            run.workspace_id,
            run.id,
            CommandRequest(RunCommandType.CANCEL, reason="stop it"),
            utc_now(),
        )

    recovered, finished, command, items = await _recover_dead_agent(uow, artifact_store, claimed, accepted)
    assert recovered is not None
    assert (finished.state, finished.state_reason) == (RunState.CANCELLED, "stop it")
    assert command is not None
    assert command.state is RunCommandState.APPLIED
    # What may have been sent stays UNKNOWN; nothing is sent again.
    assert items == {ItemState.SUCCEEDED: 1, ItemState.UNKNOWN: 2, ItemState.UNSENT: 17}
