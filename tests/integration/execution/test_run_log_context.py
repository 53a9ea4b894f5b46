"""A run executed by the embedded agent logs under the run's ids: every line it writes to the Service's
log names the workspace, run, lease, agent and provider, and a stable event."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from tests.integration.execution._world import (
    build_world,
    create_run,
    events_of,
    eventually,
    finished,
    make_agent,
)
from wepush.agent.engine import ProviderResult, ThreadSafetyMode
from wepush.agent.providers.catalog import ProviderCatalog
from wepush.agent.providers.fake import FakeProviderFactory, Hang
from wepush.server.application.execution import RunAvailabilityNotifier
from wepush.server.domain import Run
from wepush.server.infra.artifacts import LocalArtifactStore
from wepush.server.infra.db import SqlUnitOfWorkFactory
from wepush.server.infra.logging import JsonFormatter, current_log_context
from wepush.server.infra.secrets import LocalEnvelopeSecretStore

RUN_FIELDS = ("workspaceId", "runId", "leaseId", "agentId", "providerId", "event")


@pytest.fixture
def execution_log() -> Iterator[io.StringIO]:
    """The execution logger's records, formatted as the Service's JSON lines."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter(service="wepush-server", instance_id="node-a"))
    logger = logging.getLogger("wepush.server.execution")
    previous = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    yield stream
    logger.removeHandler(handler)
    logger.setLevel(previous)


def _lines_of(stream: io.StringIO, run: Run) -> list[dict[str, Any]]:
    """The lines about ``run``: those whose message names it."""
    entries = [json.loads(line) for line in stream.getvalue().splitlines()]
    return [entry for entry in entries if run.id in entry["message"]]


async def _lease_id(uow: SqlUnitOfWorkFactory, run: Run) -> str:
    leased = [e for e in await events_of(uow, run) if e.type == "RUN_LEASED"]
    assert leased, "the run was never leased"
    return str(leased[0].data["leaseId"])


async def test_a_run_logs_its_workspace_run_lease_agent_and_provider_ids(
    uow: SqlUnitOfWorkFactory,
    artifact_store: LocalArtifactStore,
    secret_store: LocalEnvelopeSecretStore,
    notifier: RunAvailabilityNotifier,
    execution_log: io.StringIO,
) -> None:
    world = await build_world(uow, secret_store, recipients=3)
    catalog = ProviderCatalog.from_factories([FakeProviderFactory()])
    agent = make_agent(uow, catalog, artifact_store, secret_store, notifier, world.workspace.id)
    await agent.start()
    try:
        run = await create_run(uow, world, notifier)
        await eventually(lambda: finished(uow, run), what="the run to finish")
        lease_id = await _lease_id(uow, run)
        agent_id = agent.agent_id
    finally:
        await agent.shutdown()

    lines = _lines_of(execution_log, run)
    assert [entry["event"] for entry in lines] == ["RUN_CLAIMED", "RUN_FINISHED"]
    for entry in lines:
        assert all(entry[name] is not None for name in RUN_FIELDS), entry
        assert entry["workspaceId"] == world.workspace.id
        assert entry["runId"] == run.id
        assert entry["leaseId"] == lease_id
        assert entry["agentId"] == agent_id
        assert entry["providerId"] == "wepush.fake"
    # The binding ends with the run: nothing leaks into the test's own context.
    assert current_log_context() == {}


async def test_a_lost_lease_is_logged_under_the_run_it_belonged_to(
    uow: SqlUnitOfWorkFactory,
    artifact_store: LocalArtifactStore,
    secret_store: LocalEnvelopeSecretStore,
    notifier: RunAvailabilityNotifier,
    execution_log: io.StringIO,
) -> None:
    world = await build_world(uow, secret_store, recipients=5)
    provider = FakeProviderFactory(
        outcome=lambda request: ProviderResult.ok() if request.recipient.sequence <= 1 else Hang(),
        thread_safety=ThreadSafetyMode.THREAD_SAFE,
    )
    catalog = ProviderCatalog.from_factories([provider])
    agent = make_agent(
        uow,
        catalog,
        artifact_store,
        secret_store,
        notifier,
        world.workspace.id,
        lease_ttl=timedelta(seconds=1.5),
    )
    await agent.start()
    try:
        run = await create_run(uow, world, notifier)

        async def running() -> bool:
            return run.id in agent.active_runs

        await eventually(running, what="the run to be executing")
        lease_id = await _lease_id(uow, run)
        async with uow() as unit:
            await unit.leases.revoke(lease_id)

        async def lost() -> bool:
            return any(e["event"] == "LEASE_LOST" for e in _lines_of(execution_log, run))

        await eventually(lost, what="the lost lease to be logged")
    finally:
        await agent.shutdown()

    [entry, *_] = [e for e in _lines_of(execution_log, run) if e["event"] == "LEASE_LOST"]
    assert entry["level"] == "WARNING"
    assert (entry["runId"], entry["leaseId"], entry["workspaceId"]) == (run.id, lease_id, world.workspace.id)
    assert entry["agentId"] is not None
    assert entry["providerId"] == "wepush.fake"
