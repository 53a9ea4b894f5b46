"""The embedded agent as a supervisor: a loop that keeps failing brings the whole agent down, visibly."""

from __future__ import annotations

from typing import Any

from tests.integration.execution._world import build_world, eventually, make_agent
from wepush.agent.providers.catalog import ProviderCatalog
from wepush.agent.providers.fake import FakeProviderFactory
from wepush.server.application.execution import RunAvailabilityNotifier
from wepush.server.domain import AgentStatus, UnitOfWork
from wepush.server.infra.artifacts import LocalArtifactStore
from wepush.server.infra.db import SqlUnitOfWorkFactory
from wepush.server.infra.secrets import LocalEnvelopeSecretStore


class BreakableDatabase:
    """A unit-of-work factory whose database can be made unreachable."""

    def __init__(self, inner: SqlUnitOfWorkFactory) -> None:
        self.inner = inner
        self.broken = False

    def __call__(self, *, read_only: bool = False) -> UnitOfWork:
        if self.broken:
            raise ConnectionError("database unreachable")
        return self.inner(read_only=read_only)

    @property
    def concurrent(self) -> bool:
        return self.inner.concurrent

    @property
    def writers_side_by_side(self) -> bool:
        return self.inner.writers_side_by_side

    def reader_beside_writer(self) -> Any:
        return self.inner.reader_beside_writer()


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
