"""The embedded agent's loops through a PostgreSQL outage (the database behind a loopback gate the test
closes): each loop logs one warning when the outage starts and one line when it passes, however many of
its passes fail in between, and never a traceback."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import AsyncIterator
from datetime import timedelta

import pytest
from sqlalchemy import make_url
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.fixtures.tcp_gate import TcpGate, tcp_gate
from wepush.agent.providers.catalog import ProviderCatalog
from wepush.agent.providers.fake import FakeProviderFactory
from wepush.server.application.execution import RunAvailabilityNotifier
from wepush.server.domain import DatabaseUnavailable, Workspace, utc_now
from wepush.server.infra.artifacts import LocalArtifactStore
from wepush.server.infra.db import (
    DatabaseRecoveryLocks,
    SqlUnitOfWork,
    SqlUnitOfWorkFactory,
    create_database,
)
from wepush.server.infra.execution import EmbeddedAgent, EmbeddedAgentSettings
from wepush.server.infra.secrets import LocalEnvelopeSecretStore

pytestmark = pytest.mark.postgres

# The loops that touch the database while no run executes, by task name: what each logs as.
LOOPS = {
    "embedded-agent:claimer": ("run claimer", "RUN_CLAIM_FAILED"),
    "embedded-agent:lease-reaper": ("lease reaper", "LEASE_REAPER_FAILED"),
    "embedded-agent:lease-renewer": ("embedded agent heartbeat", "AGENT_HEARTBEAT_FAILED"),
}
# Units of work begun until each loop's first pass after the outage has surely ended: the reaper's pass
# begins two (leases, then orphaned runs), the others one.
PASS_AGAIN = {
    "embedded-agent:claimer": 2,
    "embedded-agent:lease-reaper": 3,
    "embedded-agent:lease-renewer": 2,
}
# Passes each loop must have failed before the database comes back (a failed pass begins one unit of
# work, which cannot connect): far more than the lines the outage may cost.
FAILED_PASSES = {
    "embedded-agent:claimer": 20,
    "embedded-agent:lease-reaper": 20,
    "embedded-agent:lease-renewer": 3,
}


class CountedUnitsOfWork(SqlUnitOfWorkFactory):
    """Counts the units of work each task (each loop) begins while ``counting``."""

    counting = False
    begun: Counter[str]

    def __call__(self, *, read_only: bool = False) -> SqlUnitOfWork:
        if self.counting:
            task = asyncio.current_task()
            self.begun[task.get_name() if task is not None else "?"] += 1
        return super().__call__(read_only=read_only)


@pytest.fixture
async def gated_engine(postgres_url: str) -> AsyncIterator[tuple[AsyncEngine, TcpGate]]:
    real = make_url(postgres_url)
    assert real.host is not None
    async with tcp_gate(real.host, real.port or 5432) as gate:
        url = real.set(host="127.0.0.1", port=gate.port).render_as_string(hide_password=False)
        engine = create_database(url)
        try:
            yield engine, gate
        finally:
            await engine.dispose()


@pytest.fixture
def gated(gated_engine: tuple[AsyncEngine, TcpGate]) -> tuple[CountedUnitsOfWork, TcpGate]:
    engine, gate = gated_engine
    uow = CountedUnitsOfWork(engine)
    uow.begun = Counter()
    return uow, gate


async def passes(uow: CountedUnitsOfWork, at_least: dict[str, int], what: str) -> None:
    """Wait until each loop (by task name) has begun ``at_least`` passes from now; the bound is only so
    a broken loop cannot hang the test run."""
    uow.begun.clear()
    uow.counting = True
    deadline = time.monotonic() + 60
    try:
        while not all(uow.begun[task] >= n for task, n in at_least.items()):
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}: {dict(uow.begun)}")
            await asyncio.sleep(0.02)
    finally:
        uow.counting = False


def wepush_records(caplog: pytest.LogCaptureFixture, level: int) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name.startswith("wepush") and r.levelno >= level]


async def outage_agent(
    uow: CountedUnitsOfWork,
    artifact_store: LocalArtifactStore,
    secret_store: LocalEnvelopeSecretStore,
    notifier: RunAvailabilityNotifier,
    *,
    claim_failure_limit: int,
) -> EmbeddedAgent:
    now = utc_now()
    workspace = Workspace(name="outage", created_at=now, updated_at=now)
    async with uow() as unit:
        await unit.workspaces.add(workspace)
    return EmbeddedAgent(
        uow=uow,
        providers=ProviderCatalog.from_factories([FakeProviderFactory()]),
        artifact_store=artifact_store,
        secret_store=secret_store,
        notifier=notifier,
        workspace_id=workspace.id,
        settings=EmbeddedAgentSettings(
            scan_interval=timedelta(milliseconds=20),  # the claimer's and the reaper's pass
            lease_ttl=timedelta(seconds=1.5),  # a heartbeat every 0.5 s
            claim_failure_limit=claim_failure_limit,
            shutdown_grace=timedelta(milliseconds=200),
        ),
    )


async def test_an_outage_is_one_warning_and_one_recovery_line_per_loop_however_many_passes_fail(
    gated: tuple[CountedUnitsOfWork, TcpGate],
    artifact_store: LocalArtifactStore,
    secret_store: LocalEnvelopeSecretStore,
    notifier: RunAvailabilityNotifier,
    caplog: pytest.LogCaptureFixture,
) -> None:
    uow, gate = gated
    # About the log, not about when the claimer gives up.
    agent = await outage_agent(uow, artifact_store, secret_store, notifier, claim_failure_limit=1_000_000)
    caplog.set_level(logging.INFO)
    await agent.start()
    try:
        await gate.close()  # the database host goes down: open connections cut, new ones refused
        await passes(uow, FAILED_PASSES, "every loop to fail pass after pass")
        during = wepush_records(caplog, logging.WARNING)
        await gate.open()  # back, on the same port
        # Until each loop began its second pass since: its first, which succeeded, has ended.
        await passes(uow, PASS_AGAIN, "every loop to pass again")
    finally:
        await agent.shutdown()

    assert agent.failure is None
    # One line per loop for the whole outage, without a traceback...
    assert sorted((r.levelname, str(getattr(r, "event", None))) for r in during) == sorted(
        ("WARNING", event) for _, event in LOOPS.values()
    )
    assert all(r.exc_info is None for r in during)
    assert all("the database is unavailable" in r.getMessage() for r in during)
    assert "Traceback" not in caplog.text
    # ... and one once it is back, with how many of its passes failed meanwhile.
    recovered = [
        (str(getattr(r, "loop", None)), getattr(r, "failedPasses", 0))
        for r in wepush_records(caplog, logging.INFO)
        if getattr(r, "event", None) == "BACKGROUND_PASS_RECOVERED"
    ]
    assert sorted(loop for loop, _ in recovered) == sorted(loop for loop, _ in LOOPS.values())
    for task, (loop, _) in LOOPS.items():
        assert dict(recovered)[loop] >= FAILED_PASSES[task]


async def test_the_claimer_waits_out_an_outage_longer_than_its_failure_limit(
    gated: tuple[CountedUnitsOfWork, TcpGate],
    artifact_store: LocalArtifactStore,
    secret_store: LocalEnvelopeSecretStore,
    notifier: RunAvailabilityNotifier,
) -> None:
    # The limit ends a claimer that keeps failing for a fault of its own; an outage is the database's, and
    # an agent that gave up on one sent nothing again until the Service was restarted.
    uow, gate = gated
    agent = await outage_agent(uow, artifact_store, secret_store, notifier, claim_failure_limit=3)
    await agent.start()
    try:
        await gate.close()
        await passes(uow, {"embedded-agent:claimer": 20}, "the claimer to fail far beyond its limit")
        await gate.open()
        await passes(uow, {"embedded-agent:claimer": 3}, "the claimer to scan again")
        assert agent.failure is None
    finally:
        await agent.shutdown()
    assert agent.failure is None


async def test_a_recovery_lock_asked_for_during_an_outage_is_told_as_the_outage(
    gated_engine: tuple[AsyncEngine, TcpGate],
) -> None:
    # The lock's connection is not a unit of work's; the loops recovering runs wait out only an outage
    # told as one, and logged a traceback for the driver's own error.
    engine, gate = gated_engine
    await gate.close()
    with pytest.raises(DatabaseUnavailable):
        async with DatabaseRecoveryLocks(engine).hold("run-a"):
            pass
    await gate.open()
    async with DatabaseRecoveryLocks(engine).hold("run-a") as held:
        assert held
