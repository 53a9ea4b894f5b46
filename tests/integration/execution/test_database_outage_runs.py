"""What a run does when its database goes away under it (PostgreSQL behind a loopback gate the test
closes, the agent alive the whole time).

An outage shorter than the lease does not end the run: the agent stops sending (nothing could be put on
record), keeps its lease and its results, and carries on once the database is back; every recipient is
sent exactly once. An outage that outlasts the lease gives the run up to the recovery, which ends it
with an item row behind every count. And however a run ends, its counts are its item rows: a resend of
the UNSENT ones finds exactly the recipients nothing was sent to.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import timedelta
from typing import NamedTuple, Protocol

import pytest
from sqlalchemy import make_url

from tests.fixtures.tcp_gate import TcpGate, tcp_gate
from tests.integration.execution._world import (
    World,
    artifacts_of,
    build_http_world,
    create_run,
    events_of,
    eventually,
    finished,
    jsonl,
    load_run,
    loopback_http_catalog,
    make_agent,
    mobile,
    types_of,
)
from wepush.agent.engine import EngineOptions
from wepush.agent.providers.testing import ScriptedResponse, VendorServer
from wepush.server.application.execution import ArtifactDownloads, RunAvailabilityNotifier
from wepush.server.domain import ArtifactState, ItemState, LeaseState, PageRequest, Run, RunState
from wepush.server.infra.artifacts import LocalArtifactStore
from wepush.server.infra.db import SqlUnitOfWorkFactory, create_database
from wepush.server.infra.execution import EmbeddedAgent
from wepush.server.infra.secrets import LocalEnvelopeSecretStore

pytestmark = pytest.mark.postgres

RECIPIENTS = 200
CONCURRENCY = 4
READ_BATCH = 10
ANSWER_SECONDS = 0.05
"""With four calls at a time the whole audience takes about 2.5 s without an outage."""


@dataclass
class Databases:
    direct: SqlUnitOfWorkFactory
    """The test's own view of the database, never cut."""
    gated: SqlUnitOfWorkFactory
    """The agent's, through the gate."""
    gate: TcpGate


@pytest.fixture
async def databases(postgres_url: str) -> AsyncIterator[Databases]:
    real = make_url(postgres_url)
    assert real.host is not None
    async with tcp_gate(real.host, real.port or 5432) as gate:
        gated_url = real.set(host="127.0.0.1", port=gate.port).render_as_string(hide_password=False)
        direct, gated = create_database(postgres_url), create_database(gated_url)
        try:
            yield Databases(SqlUnitOfWorkFactory(direct), SqlUnitOfWorkFactory(gated), gate)
        finally:
            await gated.dispose()
            await direct.dispose()


@pytest.fixture
async def vendor() -> AsyncIterator[VendorServer]:
    async with VendorServer(
        default=ScriptedResponse(200, json={"success": True}, delay_seconds=ANSWER_SECONDS)
    ) as v:
        yield v


@pytest.fixture
async def world(databases: Databases, secret_store: LocalEnvelopeSecretStore, vendor: VendorServer) -> World:
    return await build_http_world(
        databases.direct,
        secret_store,
        vendor.base_url,
        recipients=RECIPIENTS,
        policies={
            "concurrency": {"min": 1, "max": CONCURRENCY, "target": CONCURRENCY},
            "retry": {"maxAttempts": 1},
        },
    )


def _hits(vendor: VendorServer) -> Counter[int]:
    """Requests per recipient sequence."""
    return Counter(int(str(r.json()["mobile"])[-4:]) for r in vendor.requests)  # type: ignore[index]


async def _items(databases: Databases, run: Run) -> dict[int, ItemState]:
    items: dict[int, ItemState] = {}
    after: int | None = None
    async with databases.direct(read_only=True) as unit:
        while True:
            page = await unit.run_items.list_page(run.id, PageRequest(limit=500, after=after))
            items |= {item.sequence: item.state for item in page.items}
            if page.next_after is None:
                return items
            after = page.next_after


async def _download(downloads: ArtifactDownloads, run: Run, artifact_id: str) -> bytes:
    opened = await downloads.open_artifact(run.workspace_id, run.id, artifact_id)
    return b"".join([chunk async for chunk in opened.chunks])


async def _recorded_some(databases: Databases, run: Run) -> bool:
    async with databases.direct(read_only=True) as unit:
        return bool(await unit.run_items.count_by_state(run.id))


async def _outage(gate: TcpGate, vendor: VendorServer, seconds: float) -> int:
    """Cut the database for ``seconds`` of real time (it is the outage being simulated, not a wait for
    the code under test); returns how many requests the vendor received meanwhile."""
    await gate.close()
    before = vendor.request_count
    await asyncio.sleep(seconds)
    during = vendor.request_count - before
    await gate.open()
    return during


async def _assert_counts_are_item_rows(databases: Databases, run: Run) -> dict[int, ItemState]:
    """Every recipient has an item row and the run's counts are those rows: a resend of any outcome
    (it counts the rows) finds exactly the recipients the counts name."""
    items = await _items(databases, run)
    assert sorted(items) == list(range(1, RECIPIENTS + 1))
    by_state = Counter(items.values())
    c = run.counts
    assert (c.total, c.succeeded, c.failed, c.unknown, c.unsent, c.skipped) == (
        RECIPIENTS,
        by_state[ItemState.SUCCEEDED],
        by_state[ItemState.FAILED],
        by_state[ItemState.UNKNOWN],
        by_state[ItemState.UNSENT],
        by_state[ItemState.SKIPPED],
    )
    completed = [e for e in await events_of(databases.direct, run) if e.type == "RUN_COMPLETED"]
    assert len(completed) == 1
    assert {k: completed[0].data["counts"][k] for k in ("succeeded", "unknown", "unsent")} == {
        "succeeded": c.succeeded,
        "unknown": c.unknown,
        "unsent": c.unsent,
    }
    return items


class _OutageRun(NamedTuple):
    agent: EmbeddedAgent
    run: Run
    sent_during: int
    """Requests the vendor received while the database was cut."""


class _RunThroughOutage(Protocol):
    async def __call__(self, *, lease_ttl: timedelta, outage_seconds: float) -> _OutageRun: ...


@pytest.fixture
def run_through_outage(
    databases: Databases,
    artifact_store: LocalArtifactStore,
    secret_store: LocalEnvelopeSecretStore,
    notifier: RunAvailabilityNotifier,
    vendor: VendorServer,
    world: World,
) -> _RunThroughOutage:
    async def run_through(*, lease_ttl: timedelta, outage_seconds: float) -> _OutageRun:
        """Start an agent whose leases last ``lease_ttl`` and a run; once the run's first results are
        stored, cut the agent's database for ``outage_seconds``; wait for the run to end (by the agent
        or by a recovery), then stop the agent."""
        agent = make_agent(
            databases.gated,
            loopback_http_catalog(),
            artifact_store,
            secret_store,
            notifier,
            world.workspace.id,
            lease_ttl=lease_ttl,
            engine_options=EngineOptions(
                read_batch_size=READ_BATCH,
                read_low_water=5,
                result_batch_size=100,
                progress_interval=timedelta(milliseconds=500),
            ),
        )
        await agent.start()
        try:
            run = await create_run(databases.direct, world, notifier)
            await eventually(lambda: _recorded_some(databases, run), what="the first results to be stored")
            sent_during = await _outage(databases.gate, vendor, outage_seconds)
            await eventually(lambda: finished(databases.direct, run), what="the run to end")
        finally:
            await agent.shutdown()
        return _OutageRun(agent, run, sent_during)

    return run_through


async def test_a_database_outage_shorter_than_the_lease_pauses_the_run_which_then_sends_everyone_once(
    databases: Databases,
    artifact_store: LocalArtifactStore,
    vendor: VendorServer,
    run_through_outage: _RunThroughOutage,
) -> None:
    # Longer than every retry budget the run used to have (0.7 s for a dispatch mark, about 3 s for
    # the engine's appends), far shorter than the lease.
    agent, run, sent_during = await run_through_outage(lease_ttl=timedelta(seconds=10), outage_seconds=3.5)

    done = await load_run(databases.direct, run)
    assert done.state is RunState.SUCCEEDED, done.state_reason
    # Sending paused: at most the calls in flight and what the dispatch mark already covered.
    assert sent_during <= CONCURRENCY + 2 * READ_BATCH
    assert _hits(vendor) == Counter({n: 1 for n in range(1, RECIPIENTS + 1)})
    items = await _assert_counts_are_item_rows(databases, done)
    assert set(items.values()) == {ItemState.SUCCEEDED}
    events = await events_of(databases.direct, done)
    assert "RUN_LOST" not in types_of(events)
    async with databases.direct(read_only=True) as unit:
        leases = await unit.leases.list_for_agent(agent.agent_id, active_only=False)
    assert [(lease.epoch, lease.state) for lease in leases if lease.run_id == run.id] == [
        (1, LeaseState.RELEASED)
    ]
    artifacts = await artifacts_of(databases.direct, done)
    assert {t: a.state for t, a in artifacts.items()} == {
        "SUCCEEDED_ITEMS": ArtifactState.READY,
        "RESULTS_EXPORT": ArtifactState.READY,
        "RUN_LOG": ArtifactState.READY,
    }
    succeeded = await _download(
        ArtifactDownloads(databases.direct, artifact_store), done, artifacts["SUCCEEDED_ITEMS"].id
    )
    assert sorted(json.loads(line)["recipient"]["mobile"] for line in jsonl(succeeded)) == [
        mobile(n) for n in range(1, RECIPIENTS + 1)
    ]


async def test_a_database_outage_that_outlasts_the_lease_leaves_the_run_to_a_recovery_backed_by_item_rows(
    databases: Databases, vendor: VendorServer, run_through_outage: _RunThroughOutage
) -> None:
    agent, run, _ = await run_through_outage(lease_ttl=timedelta(seconds=2), outage_seconds=3.5)

    done = await load_run(databases.direct, run)
    assert done.state is RunState.PARTIAL, done.state_reason
    items = await _assert_counts_are_item_rows(databases, done)
    hits = _hits(vendor)
    assert set(hits.values()) == {1}
    # Nothing sent is counted UNSENT, nothing counted SUCCEEDED went unsent; UNSENT is what a resend of
    # UNSENT takes, and nobody in it was sent anything.
    unsent = {n for n, state in items.items() if state is ItemState.UNSENT}
    assert done.counts.unsent == len(unsent) > 0
    assert not unsent & hits.keys()
    assert {n for n, state in items.items() if state is ItemState.SUCCEEDED} <= hits.keys()
    assert hits.keys() <= {n for n, s in items.items() if s in (ItemState.SUCCEEDED, ItemState.UNKNOWN)}
    # The agent wrote no end of its own: the run's only end is the recovery's.
    kinds = types_of(await events_of(databases.direct, done))
    assert kinds.count("RUN_LOST") == 1
    assert kinds[-1] == "RUN_COMPLETED"
    async with databases.direct(read_only=True) as unit:
        leases = await unit.leases.list_for_agent(agent.agent_id, active_only=False)
    assert [lease.state for lease in leases if lease.run_id == run.id] == [LeaseState.EXPIRED]
