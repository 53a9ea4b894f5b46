"""A command delivery that runs beside the terminal transaction, and finds the lease that transaction has
just released, is not a lost lease: the run finished, and nothing is reported or stopped as lost."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from types import TracebackType
from typing import Any, cast

import pytest

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
from wepush.server.domain import RunCommand, RunCommandState, RunCommandType, RunState, UnitOfWork, utc_now
from wepush.server.infra.artifacts import LocalArtifactStore
from wepush.server.infra.db import SqlUnitOfWorkFactory
from wepush.server.infra.secrets import LocalEnvelopeSecretStore

AfterRelease = Callable[[], Awaitable[None]]


class _Unit:
    """One unit of work of the wrapped factory: notes a lease release and, once the transaction that
    released it has committed, runs ``after_release`` before handing control back to the caller."""

    def __init__(self, inner: UnitOfWork, factory: _ReleaseSpy) -> None:
        self._inner = inner
        self._factory = factory
        self._released = False

    async def __aenter__(self) -> Any:
        unit = await self._inner.__aenter__()
        leases = unit.leases
        release = leases.release

        async def spied(*args: Any, **kwargs: Any) -> Any:
            self._released = True
            return await release(*args, **kwargs)

        leases.release = spied  # type: ignore[method-assign]
        return unit

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self._inner.__aexit__(kind, exc, tb)
        if kind is None and self._released and self._factory.after_release is not None:
            hook, self._factory.after_release = self._factory.after_release, None
            await hook()


class _ReleaseSpy:
    def __init__(self, inner: SqlUnitOfWorkFactory) -> None:
        self._inner = inner
        self.after_release: AfterRelease | None = None

    def __call__(self, *, read_only: bool = False) -> UnitOfWork:
        return cast(UnitOfWork, _Unit(self._inner(read_only=read_only), self))

    def reader_beside_writer(self) -> AbstractAsyncContextManager[tuple[UnitOfWork | None, UnitOfWork]]:
        return self._inner.reader_beside_writer()

    @property
    def concurrent(self) -> bool:
        return self._inner.concurrent

    @property
    def writers_side_by_side(self) -> bool:
        return self._inner.writers_side_by_side


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
