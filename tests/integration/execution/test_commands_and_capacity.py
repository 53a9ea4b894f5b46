"""Operator commands reach the running engine and are acknowledged; max-runs is honoured; shutdown settles
runs; a run the engine refuses still accounts for every recipient."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta

import pytest

from tests.integration.execution._world import (
    AgentFactory,
    World,
    artifacts_of,
    build_world,
    create_run,
    events_of,
    eventually,
    finished,
    identity_holds,
    load_run,
    send_command,
    types_of,
)
from wepush.agent.engine import ProviderResult, ThreadSafetyMode, ValidationIssue
from wepush.agent.engine.testing import FakeClock
from wepush.agent.providers.fake import FakeProviderFactory, Hang
from wepush.server.application.execution import RunAvailabilityNotifier
from wepush.server.domain import ItemState, Run, RunCommand, RunCommandState, RunCommandType, RunState
from wepush.server.infra.db import SqlUnitOfWorkFactory
from wepush.server.infra.secrets import LocalEnvelopeSecretStore


@pytest.fixture
async def world(uow: SqlUnitOfWorkFactory, secret_store: LocalEnvelopeSecretStore) -> World:
    return await build_world(
        uow,
        secret_store,
        recipients=40,
        policies={"concurrency": {"min": 1, "max": 10, "target": 2}, "retry": {"maxAttempts": 1}},
    )


def hanging_after(ok: int) -> FakeProviderFactory:
    """Items 1..ok succeed; every later item waits until it is cancelled (the run stays busy)."""
    return FakeProviderFactory(
        outcome=lambda request: ProviderResult.ok() if request.recipient.sequence <= ok else Hang(),
        thread_safety=ThreadSafetyMode.THREAD_SAFE,
    )


async def _command(uow: SqlUnitOfWorkFactory, command_id: str) -> RunCommand:
    async with uow(read_only=True) as unit:
        command = await unit.run_commands.get_by_command_id(command_id)
    assert command is not None
    return command


async def _acknowledged(uow: SqlUnitOfWorkFactory, command_id: str) -> bool:
    return (await _command(uow, command_id)).state in (RunCommandState.APPLIED, RunCommandState.REJECTED)


async def _in_state(uow: SqlUnitOfWorkFactory, run: Run, state: RunState) -> bool:
    return (await load_run(uow, run)).state is state


async def test_pause_resume_concurrency_and_cancel_are_delivered_acknowledged_and_change_the_run(
    uow: SqlUnitOfWorkFactory, notifier: RunAvailabilityNotifier, world: World, agents: AgentFactory
) -> None:
    provider = hanging_after(4)
    await agents(provider).start()
    run = await create_run(uow, world, notifier)
    await eventually(lambda: _calls_in_flight(provider, 2), what="two sends in flight")
    assert (await load_run(uow, run)).state is RunState.RUNNING

    pause = await send_command(uow, run, notifier, RunCommandType.PAUSE)
    await eventually(lambda: _acknowledged(uow, pause), what="the pause acknowledgement")
    await eventually(lambda: _in_state(uow, run, RunState.PAUSED), what="PAUSED")

    resume = await send_command(uow, run, notifier, RunCommandType.RESUME)
    await eventually(lambda: _in_state(uow, run, RunState.RUNNING), what="RUNNING again")

    widen = await send_command(uow, run, notifier, RunCommandType.CHANGE_CONCURRENCY, {"target": 4})
    await eventually(lambda: _calls_in_flight(provider, 4), what="four sends in flight")
    await eventually(lambda: _concurrency(uow, run, 4), what="the stored concurrency")

    too_wide = await send_command(uow, run, notifier, RunCommandType.CHANGE_CONCURRENCY, {"target": 99})
    await eventually(lambda: _acknowledged(uow, too_wide), what="the refusal")

    cancel = await send_command(uow, run, notifier, RunCommandType.CANCEL, {"reason": "wrong audience"})
    await eventually(lambda: finished(uow, run), what="the cancelled run to finish")

    done = await load_run(uow, run)
    commands = {cid: await _command(uow, cid) for cid in (pause, resume, widen, too_wide, cancel)}
    assert [commands[c].state for c in (pause, resume, widen, cancel)] == [RunCommandState.APPLIED] * 4
    refused = commands[too_wide]
    assert refused.state is RunCommandState.REJECTED
    assert refused.result_message is not None
    assert "CONCURRENCY_OUT_OF_RANGE" in refused.result_message
    assert "1..10" in refused.result_message
    assert (done.state, done.state_reason) == (RunState.CANCELLED, "wrong audience")
    assert (done.counts.total, done.counts.succeeded) == (40, 4)
    assert done.counts.unsent > 0
    assert identity_holds(done)

    events = await events_of(uow, run)
    kinds = types_of(events)
    for expected in ("RUN_PAUSED", "RUN_RESUMED", "CONCURRENCY_CHANGED", "RUN_CANCELLING", "RUN_COMPLETED"):
        assert expected in kinds
    acknowledged = {
        e.data["commandId"]: e.data["accepted"] for e in events if e.type == "COMMAND_ACKNOWLEDGED"
    }
    assert acknowledged == {pause: True, resume: True, widen: True, too_wide: False, cancel: True}
    assert events[-1].data["finalState"] == "CANCELLED"
    artifacts = await artifacts_of(uow, run)
    assert {"SUCCEEDED_ITEMS", "UNSENT_ITEMS", "RUN_LOG", "RESULTS_EXPORT"} <= set(artifacts)


async def test_a_run_cancelled_by_its_pause_limit_gives_that_reason_not_an_operators(
    uow: SqlUnitOfWorkFactory, notifier: RunAvailabilityNotifier, world: World, agents: AgentFactory
) -> None:
    provider = hanging_after(0)
    clock = FakeClock()
    await agents(provider, engine_clock=clock).start()
    run = await create_run(
        uow,
        world,
        notifier,
        policy_overrides={"pause": {"maxPauseDuration": "PT60S", "onPauseTimeout": "CANCEL"}},
    )
    await eventually(lambda: _calls_in_flight(provider, 2), what="two sends in flight")
    pause = await send_command(uow, run, notifier, RunCommandType.PAUSE)
    await eventually(lambda: _in_state(uow, run, RunState.PAUSED), what="PAUSED")

    # Nobody resumes the run: once the pause outlasts its limit the engine cancels it by itself.
    await clock.advance(61)

    async def cancelling_with_reason() -> bool:
        current = await load_run(uow, run)
        return current.state is RunState.CANCELLING or current.state.is_terminal

    await eventually(cancelling_with_reason, what="the run to start cancelling")
    cancelling = await load_run(uow, run)

    async def ended() -> bool:
        await clock.advance(1)
        return await finished(uow, run)

    await eventually(ended, what="the cancelled run to finish")
    done = await load_run(uow, run)
    assert (await _command(uow, pause)).state is RunCommandState.APPLIED
    assert cancelling.state_reason == "maxPauseDuration exceeded"
    assert (done.state, done.state_reason) == (RunState.CANCELLED, "maxPauseDuration exceeded")
    assert identity_holds(done)
    cancelled = [e for e in await events_of(uow, run) if e.type == "RUN_CANCELLING"]
    assert [e.data["reason"] for e in cancelled] == ["maxPauseDuration exceeded"]


async def test_at_most_max_runs_execute_at_once_and_the_next_starts_when_one_ends(
    uow: SqlUnitOfWorkFactory, notifier: RunAvailabilityNotifier, world: World, agents: AgentFactory
) -> None:
    provider = hanging_after(0)
    agent = agents(provider, max_runs=2)
    await agent.start()
    runs = [await create_run(uow, world, notifier) for _ in range(3)]

    await eventually(lambda: _count_in(uow, runs, RunState.RUNNING, 2), what="two runs running")
    await eventually(lambda: _calls_in_flight(provider, 4), what="both runs busy")
    for _ in range(6):
        # Proving that something does not happen needs a window: several hints and claimer scans pass
        # while the third run keeps waiting for a slot.
        notifier.notify()
        await asyncio.sleep(0.1)
        states = [(await load_run(uow, r)).state for r in runs]
        assert states.count(RunState.RUNNING) == 2
        assert states.count(RunState.PENDING) == 1
        assert len(agent.active_runs) == 2

    running = [r for r in runs if (await load_run(uow, r)).state is RunState.RUNNING]
    first = running[0]
    await send_command(uow, first, notifier, RunCommandType.CANCEL)
    await eventually(lambda: finished(uow, first), what="the first run to end")
    await eventually(lambda: _count_in(uow, runs, RunState.RUNNING, 2), what="the third run to start")
    assert len(agent.active_runs) == 2


async def test_shutdown_cancels_running_runs_after_the_grace_period_and_is_idempotent(
    uow: SqlUnitOfWorkFactory, notifier: RunAvailabilityNotifier, world: World, agents: AgentFactory
) -> None:
    provider = hanging_after(3)
    agent = agents(provider, shutdown_grace=timedelta(milliseconds=300))
    await agent.start()
    run = await create_run(uow, world, notifier)
    await eventually(lambda: _calls_in_flight(provider, 2), what="sends in flight")

    await agent.shutdown()
    await agent.shutdown()

    done = await load_run(uow, run)
    assert done.state is RunState.CANCELLED
    assert done.state_reason == "the Service is shutting down"
    assert identity_holds(done)
    assert agent.stopped
    assert agent.active_runs == ()


async def test_the_lease_of_a_running_run_is_renewed_and_never_reaped(
    uow: SqlUnitOfWorkFactory, notifier: RunAvailabilityNotifier, world: World, agents: AgentFactory
) -> None:
    provider = hanging_after(0)
    agent = agents(provider, lease_ttl=timedelta(seconds=1.5))
    await agent.start()
    run = await create_run(uow, world, notifier)
    await eventually(lambda: _calls_in_flight(provider, 2), what="sends in flight")
    first = await _active_lease_expiry(uow, run)

    # Three lease lifetimes pass; the reaper runs every 0.2 s, so an unrenewed lease would be recovered.
    async def renewed_past_three_lifetimes() -> bool:
        return (await _active_lease_expiry(uow, run)) > first + timedelta(seconds=4.5)

    await eventually(renewed_past_three_lifetimes, what="the lease to be renewed")
    done = await load_run(uow, run)
    assert done.state is RunState.RUNNING
    assert types_of(await events_of(uow, run)).count("RUN_LOST") == 0


async def _active_lease_expiry(uow: SqlUnitOfWorkFactory, run: Run) -> datetime:
    async with uow(read_only=True) as unit:
        lease = await unit.leases.find_active(run.id)
    assert lease is not None
    assert lease.epoch == 1
    return lease.expires_at


async def test_a_run_the_engine_refuses_fails_with_every_recipient_unsent(
    uow: SqlUnitOfWorkFactory, notifier: RunAvailabilityNotifier, world: World, agents: AgentFactory
) -> None:
    provider = FakeProviderFactory(
        account_issues=[ValidationIssue("/endpoint", "INVALID", "unreachable endpoint")]
    )
    await agents(provider).start()
    run = await create_run(uow, world, notifier)

    await eventually(lambda: finished(uow, run), what="the refused run to finish")

    done = await load_run(uow, run)
    assert done.state is RunState.FAILED
    assert done.state_reason is not None
    assert done.state_reason.startswith("PROVIDER_CONFIG_INVALID: ")
    assert done.state_reason.count("PROVIDER_CONFIG_INVALID") == 1  # the category once, then the reason
    assert (done.counts.total, done.counts.unsent) == (40, 40)
    async with uow(read_only=True) as unit:
        assert await unit.run_items.count_by_state(run.id) == {ItemState.UNSENT: 40}
    assert provider.calls == []
    assert {"UNSENT_ITEMS", "RUN_LOG", "RESULTS_EXPORT"} <= set(await artifacts_of(uow, run))
    assert types_of(await events_of(uow, run))[-1] == "RUN_COMPLETED"


async def _calls_in_flight(provider: FakeProviderFactory, at_least: int) -> bool:
    return provider.stats.active >= at_least


async def _concurrency(uow: SqlUnitOfWorkFactory, run: Run, value: int) -> bool:
    return (await load_run(uow, run)).current_concurrency == value


async def _count_in(uow: SqlUnitOfWorkFactory, runs: list[Run], state: RunState, count: int) -> bool:
    return [(await load_run(uow, r)).state for r in runs].count(state) == count
