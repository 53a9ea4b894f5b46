"""A Service that dies mid-run: the next start recovers the run through LOST and RECOVERING, splits the
items without a result by the dispatch high-water mark, and sends nothing twice."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.integration.execution._world import (
    World,
    artifacts_of,
    build_http_world,
    create_run,
    events_of,
    eventually,
    identity_holds,
    jsonl,
    load_run,
    loopback_http_catalog,
    make_agent,
    types_of,
)
from wepush.agent.providers.testing import RecordedRequest, ScriptedResponse, VendorServer
from wepush.server.application.execution import ArtifactDownloads, RunAvailabilityNotifier
from wepush.server.domain import ArtifactOwnerType, ArtifactState, ItemState, LeaseState, Run, RunState
from wepush.server.infra.artifacts import LocalArtifactStore
from wepush.server.infra.db import SqlUnitOfWorkFactory
from wepush.server.infra.secrets import LocalEnvelopeSecretStore

REPO = Path(__file__).resolve().parents[3]
AGENT_NAME = "standalone"
ANSWERED = 10  # the vendor answers recipients 1..10 at once and holds every later request open


def _sequence(request: RecordedRequest) -> int:
    body = request.json()
    assert isinstance(body, dict)
    return int(str(body["mobile"])[-4:])


@pytest.fixture
async def vendor() -> AsyncIterator[VendorServer]:
    async with VendorServer() as server:
        server.respond_with(
            lambda request: (
                ScriptedResponse(200, json={"success": True})
                if _sequence(request) <= ANSWERED
                else ScriptedResponse(200, json={"success": True}, delay_seconds=300)
            )
        )
        yield server


async def _mid_run(
    uow: SqlUnitOfWorkFactory, run: Run, vendor: VendorServer, seen: list[object], expected_mark: int
) -> bool:
    async with uow(read_only=True) as unit:
        recorded = await unit.run_items.count_by_state(run.id)
        mark = await unit.runs.dispatch_mark(run.workspace_id, run.id)
        state = (await unit.runs.get(run.workspace_id, run.id)).state
    seen[:] = [state, recorded, mark, vendor.request_count]
    return (
        recorded.get(ItemState.SUCCEEDED) == ANSWERED
        and vendor.request_count == ANSWERED + 4
        and mark == expected_mark
    )


# Batches of 10 and 4 sends at a time: 1..10 answered and stored, 11..14 held open by the vendor, and
# 15..20 read but waiting for a permit (with a low-water mark of 5 nothing more is read: 6 records wait).
# The mark follows dispatch in chunks of at most a read batch: 1..10 as 1 starts, 11..20 once dispatch
# has passed the middle of that chunk. Records read but never started do not raise it further (it went
# to 30 when marks were raised as batches were read). Everything at or below it counts as possibly sent
# (UNKNOWN); the rest is UNSENT.
@pytest.mark.parametrize(("low_water", "mark"), [(5, 20)])
async def test_a_run_whose_service_was_killed_is_recovered_and_nothing_is_sent_twice(
    low_water: int,
    mark: int,
    uow: SqlUnitOfWorkFactory,
    database_url: str,
    secret_store: LocalEnvelopeSecretStore,
    master_key_file: Path,
    artifact_dir: Path,
    artifact_store: LocalArtifactStore,
    notifier: RunAvailabilityNotifier,
    vendor: VendorServer,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    world: World = await build_http_world(
        uow,
        secret_store,
        vendor.base_url,
        recipients=40,
        policies={
            "concurrency": {"min": 1, "max": 4, "target": 4},
            "retry": {"maxAttempts": 1},
            "timeout": {"item": "PT300S"},
        },
    )
    run = await create_run(uow, world)
    config = {
        "database": database_url,
        "artifacts": str(artifact_dir),
        "masterKey": str(master_key_file),
        "workspace": world.workspace.id,
        "agentName": AGENT_NAME,
        "readLowWater": low_water,
    }
    with (tmp_path / "child.log").open("wb") as log:
        child = subprocess.Popen(  # noqa: ASYNC220 - started once, killed below
            [sys.executable, "-m", "tests.integration.execution._crash_child", json.dumps(config)],
            cwd=REPO,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    seen: list[object] = []
    try:
        await eventually(
            lambda: _mid_run(uow, run, vendor, seen, mark),
            within=60,
            what=lambda: f"the run to be half sent, saw {seen}",
        )
    finally:
        child.kill()
        await asyncio.to_thread(child.wait)
    assert (await load_run(uow, run)).state is RunState.RUNNING
    sent_before_crash = vendor.request_count

    catalog = loopback_http_catalog()
    agent = make_agent(
        uow, catalog, artifact_store, secret_store, notifier, world.workspace.id, agent_name=AGENT_NAME
    )
    await agent.start()
    try:
        done = await load_run(uow, run)
        for _ in range(3):
            notifier.notify()
            await asyncio.sleep(0.1)
        assert agent.active_runs == ()
    finally:
        await agent.shutdown()

    assert done.state is RunState.PARTIAL
    assert done.state_reason is not None
    assert "restarted" in done.state_reason
    counts = done.counts
    assert (counts.total, counts.succeeded, counts.unknown, counts.unsent) == (40, 10, mark - 10, 40 - mark)
    assert identity_holds(done)
    assert vendor.request_count == sent_before_crash
    per_recipient = Counter(_sequence(r) for r in vendor.requests)
    assert set(per_recipient.values()) == {1}
    # Every recipient the dead executor handed to the vendor lies at or below the mark: none is UNSENT.
    assert max(per_recipient) <= mark

    async with uow(read_only=True) as unit:
        leases = await unit.leases.list_for_agent(agent.agent_id, active_only=False)
    assert [(lease.run_id, lease.epoch, lease.state) for lease in leases] == [(run.id, 1, LeaseState.REVOKED)]

    kinds = types_of(await events_of(uow, run))
    assert kinds[-3:] == ["RUN_LOST", "RUN_RECOVERING", "RUN_COMPLETED"]

    artifacts = await artifacts_of(uow, run)
    assert {kind for kind, a in artifacts.items() if a.state is ArtifactState.READY} == {
        "SUCCEEDED_ITEMS",
        "UNKNOWN_ITEMS",
        "UNSENT_ITEMS",
        "RESULTS_EXPORT",
        "RUN_LOG",
    }
    downloads = ArtifactDownloads(uow, artifact_store)

    async def sequences(kind: str) -> list[int]:
        opened = await downloads.open_artifact(world.workspace.id, run.id, artifacts[kind].id)
        data = b"".join([chunk async for chunk in opened.chunks])
        return sorted(json.loads(line)["sequence"] for line in jsonl(data))

    assert await sequences("SUCCEEDED_ITEMS") == list(range(1, 11))
    assert await sequences("UNKNOWN_ITEMS") == list(range(11, mark + 1))
    assert await sequences("UNSENT_ITEMS") == list(range(mark + 1, 41))
    async with uow(read_only=True) as unit:
        every = await unit.artifacts.list_for_owner(run.workspace_id, ArtifactOwnerType.RUN, run.id)
    # Whatever the dead executor had begun is FAILED now, never served; each outcome is served once.
    assert not [a for a in every if a.state is ArtifactState.UPLOADING]
    assert len([a for a in every if a.state is ArtifactState.READY]) == 5
    # Each file set aside is told once, so a FAILED row beside a READY one of its type is explained.
    set_aside = {a.id for a in every if a.state is ArtifactState.FAILED}
    assert set_aside
    told = [r for r in caplog.records if getattr(r, "event", None) == "ARTIFACT_UPLOAD_FAILED"]
    assert sorted(str(getattr(r, "artifactId", "")) for r in told) == sorted(set_aside)
