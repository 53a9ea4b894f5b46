"""Two processes under one embedded agent name: the newcomer must not take over a name whose agent is alive.

Recovering at start revokes every lease held under the agent's name, so a second instance started under a
live instance's name used to end that instance's running runs as lost (RUN_LOST, PARTIAL). Now a fresh
heartbeat under the name is watched before anything is registered or recovered: one that moves on is a
live holder (the start is refused), one that ages past the liveness window a crashed predecessor (its runs
are recovered, as before).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta

import pytest

from tests.integration.execution._world import (
    World,
    build_world,
    create_run,
    events_of,
    eventually,
    finished,
    load_run,
    make_agent,
    types_of,
)
from wepush.agent.engine import ThreadSafetyMode
from wepush.agent.providers.catalog import ProviderCatalog
from wepush.agent.providers.fake import FakeProviderFactory, Hang
from wepush.server.application.execution import RunAvailabilityNotifier
from wepush.server.domain import (
    Agent,
    AgentKind,
    AgentLease,
    AgentStatus,
    LeaseState,
    Run,
    RunState,
    utc_now,
)
from wepush.server.infra.artifacts import LocalArtifactStore
from wepush.server.infra.db import SqlUnitOfWorkFactory
from wepush.server.infra.execution import (
    RESTART_CAUSE,
    AgentNameInUse,
    EmbeddedAgent,
    EmbeddedAgentSettings,
)
from wepush.server.infra.secrets import LocalEnvelopeSecretStore

NAME = "embedded@vm:18841"
LEASE_TTL = timedelta(seconds=6)  # a heartbeat every 2 s; the liveness window is three of them
WINDOW = LEASE_TTL


class SleepingClock:
    """The newcomer's clock and sleep: sleeping returns at once and moves the clock on instead, and
    ``meanwhile`` plays what the rest of the world does in that time (a live holder reporting its
    heartbeat). Otherwise the clock runs with real time, as the agent's loops expect of it."""

    def __init__(self) -> None:
        self.offset = timedelta()
        self.slept: list[float] = []
        self.meanwhile: Callable[[], Awaitable[None]] | None = None

    def __call__(self) -> datetime:
        return utc_now() + self.offset

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.offset += timedelta(seconds=seconds)
        if self.meanwhile is not None:
            await self.meanwhile()


def _newcomer(
    uow: SqlUnitOfWorkFactory,
    artifact_store: LocalArtifactStore,
    secret_store: LocalEnvelopeSecretStore,
    notifier: RunAvailabilityNotifier,
    world: World,
    clock: SleepingClock,
) -> EmbeddedAgent:
    return EmbeddedAgent(
        uow=uow,
        providers=ProviderCatalog.from_factories([FakeProviderFactory()]),
        artifact_store=artifact_store,
        secret_store=secret_store,
        notifier=notifier,
        workspace_id=world.workspace.id,
        settings=EmbeddedAgentSettings(
            agent_name=NAME, lease_ttl=LEASE_TTL, scan_interval=timedelta(milliseconds=200)
        ),
        clock=clock,
        sleep=clock.sleep,
    )


async def _held_run(
    uow: SqlUnitOfWorkFactory, world: World, *, status: AgentStatus, last_seen: datetime
) -> tuple[Agent, Run, AgentLease]:
    """A run leased to the agent row named ``NAME``, as a process that held the name left it."""
    run = await create_run(uow, world)
    now = utc_now()
    async with uow() as unit:
        holder = await unit.agents.add(
            Agent(
                workspace_id=world.workspace.id,
                display_name=NAME,
                kind=AgentKind.EMBEDDED,
                agent_version="0",
                protocol_version="embedded",
                created_at=now,
                updated_at=now,
            )
        )
        await unit.agents.record_heartbeat(holder.id, status=status, seen_at=last_seen)
        claimed = await unit.leases.claim(
            run.workspace_id,
            run.id,
            holder.id,
            expires_at=now + timedelta(minutes=5),
            ack_deadline=now + timedelta(minutes=5),
        )
    assert claimed is not None
    return holder, run, claimed.lease


async def _lease(uow: SqlUnitOfWorkFactory, lease: AgentLease) -> AgentLease:
    async with uow(read_only=True) as unit:
        leases = await unit.leases.list_for_agent(lease.agent_id, active_only=False)
    return next(found for found in leases if found.id == lease.id)


def _events(caplog: pytest.LogCaptureFixture, event: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if getattr(r, "event", None) == event]


async def test_a_second_agent_under_a_live_agents_name_refuses_to_start_and_leaves_its_run_alone(
    uow: SqlUnitOfWorkFactory,
    artifact_store: LocalArtifactStore,
    secret_store: LocalEnvelopeSecretStore,
    notifier: RunAvailabilityNotifier,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # QA's repro: instance 1 sends under NAME; instance 2 starts with WEPUSH_AGENT_EMBEDDED_NAME=NAME.
    world = await build_world(
        uow, secret_store, recipients=4, policies={"concurrency": {"min": 1, "max": 2, "target": 2}}
    )
    provider = FakeProviderFactory(
        outcome=lambda _request: Hang(), thread_safety=ThreadSafetyMode.THREAD_SAFE
    )
    catalog = ProviderCatalog.from_factories([provider])
    first = make_agent(
        uow,
        catalog,
        artifact_store,
        secret_store,
        notifier,
        world.workspace.id,
        agent_name=NAME,
        lease_ttl=LEASE_TTL,
    )
    await first.start()
    try:
        run = await create_run(uow, world, notifier)

        async def sending() -> bool:
            return provider.stats.active >= 2

        await eventually(sending, what="sends in flight")
        async with uow(read_only=True) as unit:
            lease = await unit.leases.find_active(run.id)
        assert lease is not None

        second = make_agent(
            uow,
            catalog,
            artifact_store,
            secret_store,
            RunAvailabilityNotifier(),
            world.workspace.id,
            agent_name=NAME,
            lease_ttl=LEASE_TTL,
        )
        with caplog.at_level(logging.INFO, logger="wepush"), pytest.raises(AgentNameInUse, match=NAME):
            await second.start()
        await second.shutdown()  # nothing started: a no-op

        assert (await load_run(uow, run)).state is RunState.RUNNING
        assert "RUN_LOST" not in types_of(await events_of(uow, run))
        still = await _lease(uow, lease)
        assert (still.state, still.epoch) == (LeaseState.ACTIVE, lease.epoch)
        assert first.active_runs == (run.id,)
        assert not first.stopped
        refused = _events(caplog, "AGENT_NAME_IN_USE")
        assert [r.levelno for r in refused] == [logging.ERROR]
        assert NAME in refused[0].getMessage()
        assert "heartbeat" in refused[0].getMessage()
        assert _events(caplog, "RUN_LOST") == []
    finally:
        await first.shutdown()


@pytest.mark.parametrize(
    ("status", "age"),
    [
        # The predecessor was killed long ago: its heartbeat missed far more than three intervals.
        (AgentStatus.ONLINE, timedelta(hours=1)),
        # It stopped cleanly a moment ago, leaving a run it could not settle: nothing to wait for.
        (AgentStatus.STOPPED, timedelta(seconds=1)),
    ],
    ids=["stale-heartbeat", "stopped-cleanly"],
)
async def test_a_name_no_live_process_holds_is_taken_over_at_once_and_its_runs_recovered(
    status: AgentStatus,
    age: timedelta,
    uow: SqlUnitOfWorkFactory,
    artifact_store: LocalArtifactStore,
    secret_store: LocalEnvelopeSecretStore,
    notifier: RunAvailabilityNotifier,
) -> None:
    world = await build_world(uow, secret_store, recipients=3)
    clock = SleepingClock()
    holder, run, lease = await _held_run(uow, world, status=status, last_seen=clock() - age)

    agent = _newcomer(uow, artifact_store, secret_store, notifier, world, clock)
    await agent.start()
    try:
        assert clock.slept == []
        assert agent.agent_id == holder.id  # the same row: that is how it finds the leases
        assert (await _lease(uow, lease)).state is LeaseState.REVOKED
        lost = [e for e in await events_of(uow, run) if e.type == "RUN_LOST"]
        assert len(lost) == 1
        assert RESTART_CAUSE in str(lost[0].data)
        # Requeued (nothing was dispatched), then executed by the newcomer: the run is not stuck.
        await eventually(lambda: finished(uow, run), what="the recovered run to finish")
    finally:
        await agent.shutdown()


@pytest.mark.parametrize("holder_alive", [False, True], ids=["crashed-predecessor", "live-holder"])
async def test_a_fresh_heartbeat_is_watched_until_it_ages_or_moves_on(
    holder_alive: bool,
    uow: SqlUnitOfWorkFactory,
    artifact_store: LocalArtifactStore,
    secret_store: LocalEnvelopeSecretStore,
    notifier: RunAvailabilityNotifier,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A kill -9 leaves the heartbeat ONLINE and seconds old, exactly like a live duplicate's: the restart
    waits (on a controllable clock) until the window has passed, unless the holder reports again."""
    world = await build_world(uow, secret_store, recipients=3)
    clock = SleepingClock()
    last_seen = clock() - timedelta(seconds=1)
    holder, run, lease = await _held_run(uow, world, status=AgentStatus.ONLINE, last_seen=last_seen)
    agent = _newcomer(uow, artifact_store, secret_store, notifier, world, clock)
    if holder_alive:

        async def holder_reports() -> None:
            async with uow() as unit:
                await unit.agents.record_heartbeat(holder.id, status=AgentStatus.ONLINE, seen_at=clock())

        clock.meanwhile = holder_reports

    with caplog.at_level(logging.INFO, logger="wepush"):
        if holder_alive:
            with pytest.raises(AgentNameInUse):
                await agent.start()
        else:
            await agent.start()
    try:
        assert _events(caplog, "AGENT_NAME_WAIT") != []
        if holder_alive:
            # Refused after the first heartbeat it saw move on, long before the window had passed.
            assert clock.slept == [2.0]
            assert (await _lease(uow, lease)).state is LeaseState.ACTIVE
            assert "RUN_LOST" not in types_of(await events_of(uow, run))
            assert [r.levelno for r in _events(caplog, "AGENT_NAME_IN_USE")] == [logging.ERROR]
        else:
            # Heartbeat intervals, the last one cut to the window: recovered once the heartbeat is 6 s old
            # (the real milliseconds the test itself takes shorten the last wait a little).
            assert clock.slept[:2] == [2.0, 2.0]
            assert len(clock.slept) == 3
            assert 0.5 < clock.slept[2] <= 1.0
            assert (await _lease(uow, lease)).state is LeaseState.REVOKED
            assert "RUN_LOST" in types_of(await events_of(uow, run))
            assert _events(caplog, "AGENT_NAME_IN_USE") == []
            await eventually(lambda: finished(uow, run), what="the recovered run to finish")
    finally:
        await agent.shutdown()
