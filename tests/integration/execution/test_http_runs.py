"""Runs executed end to end by the embedded agent through the HTTP provider against a loopback vendor."""

from __future__ import annotations

import codecs
import csv
import hashlib
import json
from collections import Counter
from collections.abc import AsyncIterator

import pytest

from tests.integration.execution._world import (
    TOKEN,
    World,
    artifacts_of,
    build_http_world,
    create_run,
    events_of,
    eventually,
    finished,
    identity_holds,
    jsonl,
    load_run,
    loopback_http_catalog,
    make_agent,
    mobile,
    types_of,
)
from wepush.agent.providers.testing import VendorServer
from wepush.server.application.execution import ArtifactDownloads, ByteRange, RunAvailabilityNotifier
from wepush.server.domain import ArtifactState, ItemState, LeaseState, RunState
from wepush.server.infra.artifacts import LocalArtifactStore
from wepush.server.infra.db import SqlUnitOfWorkFactory
from wepush.server.infra.execution import EmbeddedAgent
from wepush.server.infra.secrets import LocalEnvelopeSecretStore

RECIPIENTS = 45


@pytest.fixture
async def vendor() -> AsyncIterator[VendorServer]:
    async with VendorServer() as server:
        yield server


@pytest.fixture
async def world(
    uow: SqlUnitOfWorkFactory, secret_store: LocalEnvelopeSecretStore, vendor: VendorServer
) -> World:
    return await build_http_world(uow, secret_store, vendor.base_url, recipients=RECIPIENTS)


@pytest.fixture
async def agent(
    uow: SqlUnitOfWorkFactory,
    artifact_store: LocalArtifactStore,
    secret_store: LocalEnvelopeSecretStore,
    notifier: RunAvailabilityNotifier,
    world: World,
) -> AsyncIterator[EmbeddedAgent]:
    catalog = loopback_http_catalog()
    embedded = make_agent(uow, catalog, artifact_store, secret_store, notifier, world.workspace.id)
    await embedded.start()
    try:
        yield embedded
    finally:
        await embedded.shutdown()


async def _download(downloads: ArtifactDownloads, world: World, run_id: str, artifact_id: str) -> bytes:
    opened = await downloads.open_artifact(world.workspace.id, run_id, artifact_id)
    return b"".join([chunk async for chunk in opened.chunks])


async def test_a_pending_run_is_claimed_and_sent_to_every_recipient_exactly_once(
    uow: SqlUnitOfWorkFactory,
    notifier: RunAvailabilityNotifier,
    artifact_store: LocalArtifactStore,
    vendor: VendorServer,
    world: World,
    agent: EmbeddedAgent,
) -> None:
    run = await create_run(uow, world, notifier)

    await eventually(lambda: finished(uow, run), what="the run to finish")
    done = await load_run(uow, run)

    assert done.state is RunState.SUCCEEDED
    assert (done.counts.total, done.counts.succeeded) == (RECIPIENTS, RECIPIENTS)
    assert identity_holds(done)
    per_recipient = Counter(r.json()["mobile"] for r in vendor.requests)  # type: ignore[index]
    assert per_recipient == Counter({mobile(n): 1 for n in range(1, RECIPIENTS + 1)})
    assert {r.headers["Authorization"] for r in vendor.requests} == {f"Bearer {TOKEN}"}

    async with uow(read_only=True) as unit:
        by_state = await unit.run_items.count_by_state(run.id)
        leases = [
            lease
            for lease in await unit.leases.list_for_agent(agent.agent_id, active_only=False)
            if lease.run_id == run.id
        ]
        mark = await unit.runs.dispatch_mark(run.workspace_id, run.id)
    assert by_state == {ItemState.SUCCEEDED: RECIPIENTS}
    assert [(lease.epoch, lease.state) for lease in leases] == [(1, LeaseState.RELEASED)]
    assert mark == RECIPIENTS

    events = await events_of(uow, run)
    kinds = types_of(events)
    assert [e.sequence for e in events] == list(range(1, len(events) + 1))
    assert kinds[:3] == ["RUN_CREATED", "RUN_LEASED", "RUN_STARTED"]
    assert kinds[-1] == "RUN_COMPLETED"
    assert events[-1].data["finalState"] == "SUCCEEDED"
    assert "PROGRESS" in kinds
    # Progress counts against the whole run, not the recipients the engine has read so far.
    progress = [e.data for e in events if e.type == "PROGRESS"]
    assert {p["total"] for p in progress} == {RECIPIENTS}
    assert all(
        p["pending"]
        + p["inFlight"]
        + p["succeeded"]
        + p["failed"]
        + p["unknown"]
        + p["unsent"]
        + p["skipped"]
        == RECIPIENTS
        for p in progress
    )

    artifacts = await artifacts_of(uow, run)
    assert set(artifacts) == {"SUCCEEDED_ITEMS", "RESULTS_EXPORT", "RUN_LOG"}
    assert all(a.state is ArtifactState.READY for a in artifacts.values())
    downloads = ArtifactDownloads(uow, artifact_store)
    contents = {kind: await _download(downloads, world, run.id, a.id) for kind, a in artifacts.items()}
    for kind, artifact in artifacts.items():
        assert artifact.size_bytes == len(contents[kind])
        assert artifact.sha256 == hashlib.sha256(contents[kind]).hexdigest()
    success = [json.loads(line) for line in jsonl(contents["SUCCEEDED_ITEMS"])]
    assert sorted(line["recipient"]["mobile"] for line in success) == [
        mobile(n) for n in range(1, RECIPIENTS + 1)
    ]
    assert len({line["itemId"] for line in success}) == RECIPIENTS
    assert contents["RESULTS_EXPORT"].startswith(codecs.BOM_UTF8)
    csv_lines = jsonl(contents["RESULTS_EXPORT"].removeprefix(codecs.BOM_UTF8))
    assert next(csv.reader(csv_lines[:1]))[:3] == ["itemId", "sequence", "state"]
    assert len(csv_lines) == RECIPIENTS + 1
    log_events = [json.loads(line)["event"] for line in jsonl(contents["RUN_LOG"])]
    assert log_events[0] == "RUN_STARTED"
    assert log_events[-1] == "RUN_COMPLETED"

    everything = b"".join(contents.values()).decode() + json.dumps([e.data for e in events])
    assert TOKEN not in everything


async def test_a_downloaded_artifact_serves_byte_ranges_of_the_stored_content(
    uow: SqlUnitOfWorkFactory,
    notifier: RunAvailabilityNotifier,
    artifact_store: LocalArtifactStore,
    world: World,
    agent: EmbeddedAgent,
) -> None:
    run = await create_run(uow, world, notifier)
    await eventually(lambda: finished(uow, run), what="the run to finish")
    artifact = (await artifacts_of(uow, run))["SUCCEEDED_ITEMS"]
    downloads = ArtifactDownloads(uow, artifact_store)
    whole = await _download(downloads, world, run.id, artifact.id)

    head = await downloads.open_artifact(world.workspace.id, run.id, artifact.id, ByteRange(0, 99))
    tail = await downloads.open_artifact(world.workspace.id, run.id, artifact.id, ByteRange(None, 50))

    assert (head.start, head.end, head.content_length, head.partial) == (0, 100, 100, True)
    assert head.content_range == f"bytes 0-99/{len(whole)}"
    assert b"".join([c async for c in head.chunks]) == whole[:100]
    assert b"".join([c async for c in tail.chunks]) == whole[-50:]
    assert (head.file_name, head.content_type) == ("success.jsonl", "application/x-ndjson")
    assert head.sha256 == hashlib.sha256(whole).hexdigest()


async def test_a_dry_run_accounts_for_every_recipient_without_calling_the_vendor(
    uow: SqlUnitOfWorkFactory,
    notifier: RunAvailabilityNotifier,
    vendor: VendorServer,
    world: World,
    agent: EmbeddedAgent,
) -> None:
    run = await create_run(uow, world, notifier, dry_run=True)

    await eventually(lambda: finished(uow, run), what="the dry run to finish")
    done = await load_run(uow, run)

    assert done.state is RunState.SUCCEEDED
    assert done.counts.total == RECIPIENTS
    assert identity_holds(done)
    assert vendor.request_count == 0
