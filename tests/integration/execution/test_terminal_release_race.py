"""A command delivery that runs beside the terminal transaction, and finds the lease that transaction has
just released, is not a lost lease: the run finished, and nothing is reported or stopped as lost."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from tests.helpers_uow import InterceptedUnit, InterceptingUnitOfWork, Proceed, Statement
from tests.integration.execution._world import (
    World,
    build_world,
    claim_run,
    create_run,
    load_run,
    send_command,
)
from wepush.agent.engine import EngineOptions, ExecutionEngine
from wepush.agent.providers.catalog import ProviderCatalog
from wepush.agent.providers.fake import FakeProviderFactory
from wepush.server.application.execution import ExecutionContext, RunAvailabilityNotifier, RunExecution
from wepush.server.domain import RunCommand, RunCommandState, RunCommandType, RunState, utc_now
from wepush.server.infra.artifacts import LocalArtifactStore
from wepush.server.infra.db import SqlUnitOfWorkFactory
from wepush.server.infra.secrets import LocalEnvelopeSecretStore

AfterRelease = Callable[[], Awaitable[None]]


class _ReleaseSpy(InterceptingUnitOfWork):
    """The unit of work, noting the units that release a lease: once such a unit has committed,
    ``after_release`` runs before control goes back to the caller."""

    def __init__(self, inner: SqlUnitOfWorkFactory) -> None:
        super().__init__(inner, statements=[("leases", "release")])
        self.after_release: AfterRelease | None = None
        self._releasing: set[InterceptedUnit] = set()

    async def around(self, unit: InterceptedUnit, statement: Statement, proceed: Proceed) -> Any:
        self._releasing.add(unit)
        return await proceed()

    async def after(self, unit: InterceptedUnit, *, committed: bool) -> None:
        released = unit in self._releasing
        self._releasing.discard(unit)
        if committed and released and self.after_release is not None:
            hook, self.after_release = self.after_release, None
            await hook()


@pytest.fixture
async def world(uow: SqlUnitOfWorkFactory, secret_store: LocalEnvelopeSecretStore) -> World:
    return await build_world(uow, secret_store, recipients=3)


async def test_a_delivery_that_meets_the_runs_own_release_does_not_report_the_lease_lost(
    uow: SqlUnitOfWorkFactory,
    artifact_store: LocalArtifactStore,
    secret_store: LocalEnvelopeSecretStore,
    notifier: RunAvailabilityNotifier,
    world: World,
    caplog: pytest.LogCaptureFixture,
) -> None:
    run = await create_run(uow, world)
    claimed = await claim_run(uow, world, run)
    # The poller read this command before the run finished; it delivers it once the release committed.
    command_id = await send_command(uow, run, notifier, RunCommandType.CHANGE_CONCURRENCY, {"target": 2})
    async with uow(read_only=True) as unit:
        command = await unit.run_commands.get_by_command_id(command_id)
    assert command is not None
    spy = _ReleaseSpy(uow)
    catalog = ProviderCatalog.from_factories([FakeProviderFactory()])
    context = ExecutionContext(
        uow=spy,
        engine=ExecutionEngine(catalog.get, EngineOptions()),
        artifact_store=artifact_store,
        secret_store=secret_store,
        clock=utc_now,
    )
    execution = RunExecution(context, claimed, await load_run(uow, run))
    delivered: list[bool] = []

    async def deliver_late() -> None:
        stale: RunCommand = command
        delivered.append(await execution.deliver(stale))

    spy.after_release = deliver_late
    with caplog.at_level(logging.WARNING, logger="wepush.server.execution"):
        await execution.execute()

    finished = await load_run(uow, run)
    async with uow(read_only=True) as unit:
        answered = await unit.run_commands.get_by_command_id(command_id)
    assert delivered == [True]
    assert finished.state is RunState.SUCCEEDED
    assert execution.final_state is RunState.SUCCEEDED
    assert execution.lost is False
    assert [r for r in caplog.records if getattr(r, "event", None) == "LEASE_LOST"] == []
    # The terminal transaction answered the command; the late delivery changed nothing.
    assert answered is not None
    assert answered.state is RunCommandState.REJECTED
