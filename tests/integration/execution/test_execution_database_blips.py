"""An executing run meets a database that cannot be used for a while (the unit of work raises
``DatabaseUnavailable`` for chosen statements): every step is tried again for as long as the lease may
still be the executor's, so a short outage only delays the run, at its start as at its end. Once the
lease's expiry has passed the executor writes no end at all, and the recovery ends the run from its
item rows."""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from datetime import timedelta
from types import TracebackType
from typing import Any, cast

import pytest

from tests.integration.execution._world import (
    World,
    build_world,
    claim_run,
    create_run,
    events_of,
    load_run,
    types_of,
)
from wepush.agent.engine import EngineOptions, ExecutionEngine, SecretRef
from wepush.agent.providers.catalog import ProviderCatalog
from wepush.agent.providers.fake import FakeProviderFactory
from wepush.server.application.execution import ExecutionContext, RunExecution, RunRecovery
from wepush.server.domain import (
    DatabaseUnavailable,
    ItemState,
    LeaseState,
    Run,
    RunState,
    UnitOfWork,
    utc_now,
)
from wepush.server.infra.artifacts import LocalArtifactStore
from wepush.server.infra.db import SqlUnitOfWorkFactory
from wepush.server.infra.secrets import LocalEnvelopeSecretStore

RECIPIENTS = 20
SECRET_NAME = "account-password"


class _Unit:
    def __init__(self, inner: UnitOfWork, outage: _Outage) -> None:
        self._inner = inner
        self._outage = outage

    async def __aenter__(self) -> Any:
        unit = await self._inner.__aenter__()
        for repository, method in self._outage.failing:
            target = getattr(unit, repository)
            setattr(target, method, self._outage.wrap(repository, method, getattr(target, method)))
        return unit

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self._inner.__aexit__(kind, exc, tb)


class _Outage:
    """The unit of work, except that the statements named in ``failing`` (repository, method) lose the
    database their given number of times (every time: ``None``), as the unit of work tells a connection
    lost mid-transaction."""

    def __init__(self, inner: SqlUnitOfWorkFactory, failing: dict[tuple[str, str], int | None]) -> None:
        self._inner = inner
        self.failing = failing
        self.failed: Counter[tuple[str, str]] = Counter()

    def wrap(
        self, repository: str, method: str, statement: Callable[..., Awaitable[Any]]
    ) -> Callable[..., Awaitable[Any]]:
        key = (repository, method)

        async def failing(*args: Any, **kwargs: Any) -> Any:
            limit = self.failing[key]
            if limit is None or self.failed[key] < limit:
                self.failed[key] += 1
                raise DatabaseUnavailable()
            return await statement(*args, **kwargs)

        return failing

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
    return await build_world(
        uow,
        secret_store,
        recipients=RECIPIENTS,
        account_config={"endpoint": "fake", "password": {"$secret": SECRET_NAME}},
        secrets={SECRET_NAME: "correct horse battery staple"},
    )


def _context(
    outage: _Outage, artifact_store: LocalArtifactStore, secret_store: LocalEnvelopeSecretStore
) -> ExecutionContext:
    # The provider resolves the account's secret as it opens its session.
    catalog = ProviderCatalog.from_factories([FakeProviderFactory(secret=SecretRef("account", SECRET_NAME))])
    return ExecutionContext(
        uow=outage,
        engine=ExecutionEngine(catalog.get, EngineOptions()),
        artifact_store=artifact_store,
        secret_store=secret_store,
        clock=utc_now,
    )


async def _rows(uow: SqlUnitOfWorkFactory, run: Run) -> Counter[ItemState]:
    async with uow(read_only=True) as unit:
        return Counter(await unit.run_items.count_by_state(run.id))


async def test_a_terminal_write_that_fails_for_a_while_within_the_lease_ends_the_run_once_it_succeeds(
    uow: SqlUnitOfWorkFactory,
    artifact_store: LocalArtifactStore,
    secret_store: LocalEnvelopeSecretStore,
    world: World,
) -> None:
    run = await create_run(uow, world)
    claimed = await claim_run(uow, world, run)
    # More failures than the few tries an infrastructure glitch used to get.
    outage = _Outage(uow, {("leases", "release"): 4})
    execution = RunExecution(
        _context(outage, artifact_store, secret_store), claimed, await load_run(uow, run)
    )

    await execution.execute()

    done = await load_run(uow, run)
    assert outage.failed == {("leases", "release"): 4}
    assert (execution.lost, execution.final_state) == (False, RunState.SUCCEEDED)
    assert done.state is RunState.SUCCEEDED
    assert (done.counts.total, done.counts.succeeded) == (RECIPIENTS, RECIPIENTS)
    assert await _rows(uow, done) == Counter({ItemState.SUCCEEDED: RECIPIENTS})
    assert types_of(await events_of(uow, done)).count("RUN_COMPLETED") == 1
    async with uow(read_only=True) as unit:
        assert (await unit.leases.get(claimed.lease.id)).state is LeaseState.RELEASED


async def test_a_terminal_write_that_fails_past_the_lease_writes_no_end_and_the_recovery_ends_the_run(
    uow: SqlUnitOfWorkFactory,
    artifact_store: LocalArtifactStore,
    secret_store: LocalEnvelopeSecretStore,
    world: World,
) -> None:
    run = await create_run(uow, world)
    claimed = await claim_run(uow, world, run, lease=timedelta(seconds=2))
    outage = _Outage(uow, {("leases", "release"): None})
    execution = RunExecution(
        _context(outage, artifact_store, secret_store), claimed, await load_run(uow, run)
    )

    await execution.execute()

    # Given up at the lease's expiry: no end of its own, the run left to the lease's expiry.
    left = await load_run(uow, run)
    assert execution.lost is True
    assert execution.final_state is None
    assert left.state is RunState.RUNNING
    assert "RUN_COMPLETED" not in types_of(await events_of(uow, left))
    async with uow() as unit:
        expired = await unit.leases.expire_overdue(utc_now(), 10)
    assert [lease.id for lease in expired] == [claimed.lease.id]

    recovered = await RunRecovery(uow=uow, artifact_store=artifact_store, clock=utc_now).recover_lease(
        expired[0], "the run's lease expired"
    )

    assert recovered is not None
    done = await load_run(uow, run)
    # Every outcome the engine had was recorded before the end failed: the recovery ends it from them.
    assert done.state is RunState.SUCCEEDED
    assert await _rows(uow, done) == Counter({ItemState.SUCCEEDED: RECIPIENTS})
    assert (done.counts.total, done.counts.succeeded) == (RECIPIENTS, RECIPIENTS)


# Both are read before the engine dispatches anything: a source it cannot open or a secret it cannot
# resolve refuses the run (FAILED, every recipient UNSENT).
@pytest.mark.parametrize("statement", [("audiences", "get_snapshot"), ("secret_records", "find")])
async def test_a_database_blip_while_the_run_starts_delays_it_instead_of_failing_it(
    statement: tuple[str, str],
    uow: SqlUnitOfWorkFactory,
    artifact_store: LocalArtifactStore,
    secret_store: LocalEnvelopeSecretStore,
    world: World,
) -> None:
    run = await create_run(uow, world)
    claimed = await claim_run(uow, world, run)
    outage = _Outage(uow, {statement: 5})
    execution = RunExecution(
        _context(outage, artifact_store, secret_store), claimed, await load_run(uow, run)
    )

    await execution.execute()

    done = await load_run(uow, run)
    assert outage.failed == {statement: 5}
    assert done.state is RunState.SUCCEEDED, done.state_reason
    assert await _rows(uow, done) == Counter({ItemState.SUCCEEDED: RECIPIENTS})
