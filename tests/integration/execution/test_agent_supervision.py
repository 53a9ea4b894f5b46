"""The embedded agent as a supervisor: a loop that keeps failing brings the whole agent down, visibly."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from tests.helpers_uow import InterceptingUnitOfWork
from tests.integration.execution._world import build_world, create_run, eventually, load_run, make_agent
from wepush.agent.engine import ThreadSafetyMode
from wepush.agent.providers.catalog import ProviderCatalog
from wepush.agent.providers.fake import FakeProviderFactory, Hang
from wepush.server.application.execution import RunAvailabilityNotifier
from wepush.server.domain import AgentLease, AgentStatus, RunState, UnitOfWork
from wepush.server.infra.artifacts import LocalArtifactStore
from wepush.server.infra.db import SqlUnitOfWorkFactory
from wepush.server.infra.secrets import LocalEnvelopeSecretStore


class BreakableDatabase(InterceptingUnitOfWork):
    """A unit-of-work factory whose database can be made unreachable."""

    def __init__(self, inner: SqlUnitOfWorkFactory) -> None:
        super().__init__(inner)
        self.broken = False

    def __call__(self, *, read_only: bool = False) -> UnitOfWork:
        if self.broken:
            raise ConnectionError("database unreachable")
        return super().__call__(read_only=read_only)


async def test_a_claimer_that_keeps_failing_shuts_the_agent_down_and_reports_why(
    uow: SqlUnitOfWorkFactory,
    artifact_store: LocalArtifactStore,
    secret_store: LocalEnvelopeSecretStore,
    notifier: RunAvailabilityNotifier,
) -> None:
    world = await build_world(uow, secret_store, recipients=1)
    database = BreakableDatabase(uow)
    agent = make_agent(
        database,
        ProviderCatalog.from_factories([FakeProviderFactory()]),
        artifact_store,
        secret_store,
        notifier,
        world.workspace.id,
        claim_failure_limit=2,
    )
    await agent.start()
    async with uow(read_only=True) as unit:
        registered = await unit.agents.get(world.workspace.id, agent.agent_id)

    database.broken = True
    notifier.notify()

    async def stopped() -> bool:
        return agent.stopped

    await eventually(stopped, what="the agent to stop after repeated claim failures")
    await agent.shutdown()  # idempotent after a self-initiated shutdown

    assert isinstance(agent.failure, ConnectionError)
    assert registered.status is AgentStatus.ONLINE
    assert agent.active_runs == ()


async def test_a_database_outage_during_lease_renewal_does_not_stop_the_agent(
    uow: SqlUnitOfWorkFactory,
    artifact_store: LocalArtifactStore,
    secret_store: LocalEnvelopeSecretStore,
    notifier: RunAvailabilityNotifier,
) -> None:
    # A PostgreSQL restart or failover outlasts one renewal's retries; the renewer used to let the error
    # end its loop, and the supervisor then shut the whole agent down: no run ran on that instance again.
    world = await build_world(
        uow, secret_store, recipients=4, policies={"concurrency": {"min": 1, "max": 2, "target": 2}}
    )
    provider = FakeProviderFactory(
        outcome=lambda _request: Hang(), thread_safety=ThreadSafetyMode.THREAD_SAFE
    )
    database = BreakableDatabase(uow)
    agent = make_agent(
        database,
        ProviderCatalog.from_factories([provider]),
        artifact_store,
        secret_store,
        notifier,
        world.workspace.id,
        lease_ttl=timedelta(seconds=6),  # renewed every 2 s
    )
    await agent.start()
    try:
        run = await create_run(uow, world, notifier)

        async def sending() -> bool:
            return provider.stats.active >= 2

        await eventually(sending, what="sends in flight")
        before = await _active_lease(uow, run.id)

        database.broken = True
        # Longer than one renewal interval plus its retries (0.7 s): a renewal pass falls into the outage.
        # The lease outlives it by one more interval, so the pass after it renews in time even when a
        # loaded machine delays the timers (with 0.5 s to spare it failed now and then under CI load).
        await asyncio.sleep(3.5)
        database.broken = False

        async def renewed() -> bool:
            lease = await _active_lease(uow, run.id)
            return lease is not None and before is not None and lease.expires_at > before.expires_at

        await eventually(renewed, what="the lease to be renewed after the outage")
        assert agent.failure is None
        assert not agent.stopped
        assert agent.active_runs == (run.id,)
        assert (await load_run(uow, run)).state is RunState.RUNNING
    finally:
        await agent.shutdown()


async def _active_lease(uow: SqlUnitOfWorkFactory, run_id: str) -> AgentLease | None:
    async with uow(read_only=True) as unit:
        return await unit.leases.find_active(run_id)
