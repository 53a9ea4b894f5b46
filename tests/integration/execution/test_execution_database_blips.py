"""An executing run meets a database that cannot be used for a while (the unit of work raises
``DatabaseUnavailable`` for chosen statements): every step is tried again for as long as the lease may
still be the executor's, so a short outage only delays the run, at its start as at its end. Once the
lease's expiry has passed the executor writes no end at all, and the recovery ends the run from its
item rows."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta
from typing import Any, NamedTuple, Protocol

import pytest

from tests.helpers_uow import InterceptedUnit, InterceptingUnitOfWork, Proceed, Statement
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
    ClaimedLease,
    DatabaseUnavailable,
    ItemState,
    LeaseState,
    Run,
    RunState,
    utc_now,
)
from wepush.server.infra.artifacts import LocalArtifactStore
from wepush.server.infra.db import SqlUnitOfWorkFactory
from wepush.server.infra.secrets import LocalEnvelopeSecretStore

RECIPIENTS = 20
SECRET_NAME = "account-password"


class _Outage(InterceptingUnitOfWork):
    """The unit of work, except that the statements named in ``failing`` (repository, method) lose the
    database their given number of times (every time: ``None``), as the unit of work tells a connection
    lost mid-transaction."""

    def __init__(self, inner: SqlUnitOfWorkFactory, failing: dict[Statement, int | None]) -> None:
        super().__init__(inner, statements=failing)
        self.failing = failing
        self.failed: Counter[Statement] = Counter()

    async def around(self, unit: InterceptedUnit, statement: Statement, proceed: Proceed) -> Any:
        limit = self.failing[statement]
        if limit is None or self.failed[statement] < limit:
            self.failed[statement] += 1
            raise DatabaseUnavailable()
        return await proceed()


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


class _Executed(NamedTuple):
    run: Run
    claimed: ClaimedLease
    execution: RunExecution


class _ExecuteThrough(Protocol):
    async def __call__(self, outage: _Outage, *, lease: timedelta = ...) -> _Executed: ...


@pytest.fixture
def execute_through(
    uow: SqlUnitOfWorkFactory,
    artifact_store: LocalArtifactStore,
    secret_store: LocalEnvelopeSecretStore,
    world: World,
) -> _ExecuteThrough:
    async def execute(outage: _Outage, *, lease: timedelta = timedelta(minutes=5)) -> _Executed:
        """Create a run, claim it for ``lease`` and execute it to its end with ``outage`` as its
        unit of work."""
        run = await create_run(uow, world)
        claimed = await claim_run(uow, world, run, lease=lease)
        execution = RunExecution(
            _context(outage, artifact_store, secret_store), claimed, await load_run(uow, run)
        )
        await execution.execute()
        return _Executed(run, claimed, execution)

    return execute


async def _rows(uow: SqlUnitOfWorkFactory, run: Run) -> Counter[ItemState]:
    async with uow(read_only=True) as unit:
        return Counter(await unit.run_items.count_by_state(run.id))


async def test_a_terminal_write_that_fails_for_a_while_within_the_lease_ends_the_run_once_it_succeeds(
    uow: SqlUnitOfWorkFactory, execute_through: _ExecuteThrough
) -> None:
    # More failures than the few tries an infrastructure glitch used to get.
    outage = _Outage(uow, {("leases", "release"): 4})

    run, claimed, execution = await execute_through(outage)

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
    uow: SqlUnitOfWorkFactory, artifact_store: LocalArtifactStore, execute_through: _ExecuteThrough
) -> None:
    outage = _Outage(uow, {("leases", "release"): None})

    run, claimed, execution = await execute_through(outage, lease=timedelta(seconds=2))

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
    statement: Statement, uow: SqlUnitOfWorkFactory, execute_through: _ExecuteThrough
) -> None:
    outage = _Outage(uow, {statement: 5})

    run, _, _ = await execute_through(outage)

    done = await load_run(uow, run)
    assert outage.failed == {statement: 5}
    assert done.state is RunState.SUCCEEDED, done.state_reason
    assert await _rows(uow, done) == Counter({ItemState.SUCCEEDED: RECIPIENTS})
