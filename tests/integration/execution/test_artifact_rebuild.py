"""A run that sends while its S3 bucket cannot be reached: every upload given up says so in a WARNING
naming the run and the file, and once the bucket is back the run's outcome files are written again from
its stored item results, by one repairer however many instances sweep; its run log stays lost."""

from __future__ import annotations

import asyncio
import csv
import io
import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from datetime import timedelta

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.fixtures.s3 import ACCESS_KEY, REGION, SECRET_KEY, S3Bucket
from tests.fixtures.store_gate import StoreGate, store_gate
from tests.integration.execution._world import (
    World,
    build_world,
    create_run,
    eventually,
    finished,
    load_run,
    make_agent,
)
from wepush.agent.providers.catalog import ProviderCatalog
from wepush.agent.providers.fake import FakeProviderFactory
from wepush.server.application.execution import (
    ArtifactDownloads,
    OutcomeArtifactRepair,
    RepairReport,
    RunAvailabilityNotifier,
)
from wepush.server.config import S3Settings
from wepush.server.domain import (
    Artifact,
    ArtifactOwnerType,
    ArtifactState,
    Run,
    RunState,
    new_id,
    utc_now,
)
from wepush.server.infra.artifacts import S3ArtifactStore
from wepush.server.infra.db import DatabaseRecoveryLocks, SqlUnitOfWorkFactory
from wepush.server.infra.secrets import LocalEnvelopeSecretStore

RECIPIENTS = 20


@dataclass(frozen=True)
class LostFiles:
    """A run that ended while its bucket refused every connection, and the gate that refused them."""

    run: Run
    store: S3ArtifactStore
    gate: StoreGate
    bucket: S3Bucket
    given_up: list[logging.LogRecord]
    """The ``ARTIFACT_UPLOAD_FAILED`` lines logged meanwhile."""


@pytest.fixture
async def world(uow: SqlUnitOfWorkFactory, secret_store: LocalEnvelopeSecretStore) -> World:
    return await build_world(uow, secret_store, recipients=RECIPIENTS)


@pytest.fixture
async def lost(
    uow: SqlUnitOfWorkFactory,
    secret_store: LocalEnvelopeSecretStore,
    notifier: RunAvailabilityNotifier,
    world: World,
    s3_bucket: S3Bucket,
    caplog: pytest.LogCaptureFixture,
) -> AsyncIterator[LostFiles]:
    caplog.set_level(logging.INFO, logger="wepush.server.execution")
    async with store_gate(s3_bucket.endpoint) as gate:
        settings = S3Settings(
            endpoint_url=gate.url,
            bucket=s3_bucket.name,
            region=REGION,
            access_key_id=ACCESS_KEY,
            secret_access_key=SECRET_KEY,
            presign_ttl=timedelta(minutes=15),
        )
        store = S3ArtifactStore.from_settings(settings)
        await gate.close()
        catalog = ProviderCatalog.from_factories([FakeProviderFactory()])
        agent = make_agent(uow, catalog, store, secret_store, notifier, world.workspace.id)
        await agent.start()
        try:
            run = await create_run(uow, world, notifier)
            await eventually(lambda: finished(uow, run), within=60, what="the run to end")
        finally:
            await agent.shutdown()
        given_up = [r for r in caplog.records if getattr(r, "event", None) == "ARTIFACT_UPLOAD_FAILED"]
        yield LostFiles(await load_run(uow, run), store, gate, s3_bucket, given_up)


async def _files(uow: SqlUnitOfWorkFactory, run: Run) -> list[Artifact]:
    async with uow(read_only=True) as unit:
        return await unit.artifacts.list_for_owner(run.workspace_id, ArtifactOwnerType.RUN, run.id)


def _states(files: list[Artifact]) -> list[tuple[str, ArtifactState]]:
    return sorted((a.artifact_type, a.state) for a in files)


async def _content(uow: SqlUnitOfWorkFactory, lost: LostFiles, artifact: Artifact) -> str:
    opened = await ArtifactDownloads(uow, lost.store).open_artifact(
        lost.run.workspace_id, lost.run.id, artifact.id
    )
    return b"".join([chunk async for chunk in opened.chunks]).decode("utf-8")


async def test_a_run_that_sent_while_the_bucket_was_down_gets_its_outcome_files_back_once_it_is_up(
    uow: SqlUnitOfWorkFactory, lost: LostFiles
) -> None:
    run, given_up = lost.run, lost.given_up
    at_the_end = await _files(uow, run)
    repair = OutcomeArtifactRepair(uow, lost.store, utc_now)

    while_down = await repair.sweep()
    still_down = await _files(uow, run)
    await lost.gate.open()
    back = await repair.sweep()
    again = await repair.sweep()
    after = await _files(uow, run)

    assert run.state is RunState.SUCCEEDED
    assert _states(at_the_end) == [
        ("RESULTS_EXPORT", ArtifactState.FAILED),
        ("RUN_LOG", ArtifactState.FAILED),
        ("SUCCEEDED_ITEMS", ArtifactState.FAILED),
    ]
    # One WARNING for each file given up, naming the run and the file.
    assert sorted(str(getattr(r, "artifactType", None)) for r in given_up) == [
        "RESULTS_EXPORT",
        "RUN_LOG",
        "SUCCEEDED_ITEMS",
    ]
    assert all(r.levelno == logging.WARNING and run.id in r.getMessage() for r in given_up)
    assert {getattr(r, "runId", None) for r in given_up} == {run.id}
    # While the bucket is still down a pass leaves nothing behind; once it is back the files are written.
    assert while_down.store_failed
    assert while_down.rebuilt == 0
    assert still_down == at_the_end
    assert back == RepairReport(rebuilt=2)
    assert again == RepairReport()
    rebuilt = {a.artifact_type: a for a in after if a.state is ArtifactState.READY}
    assert set(rebuilt) == {"SUCCEEDED_ITEMS", "RESULTS_EXPORT"}
    # The run log cannot be written again: it stays the FAILED record of its loss.
    assert [a.state for a in after if a.artifact_type == "RUN_LOG"] == [ArtifactState.FAILED]
    lines = [
        json.loads(line) for line in (await _content(uow, lost, rebuilt["SUCCEEDED_ITEMS"])).splitlines()
    ]
    assert [(line["sequence"], line["state"]) for line in lines] == [
        (n, "SUCCEEDED") for n in range(1, RECIPIENTS + 1)
    ]
    assert lines[0]["recipient"]["mobile"] == "13800000001"
    export = await _content(uow, lost, rebuilt["RESULTS_EXPORT"])
    rows = list(csv.reader(io.StringIO(export.removeprefix("\ufeff"))))
    assert len(rows) == RECIPIENTS + 1
    # A file written again lives as long as the one it replaces would have.
    original = {a.artifact_type: a.expires_at for a in at_the_end}
    assert {t: a.expires_at for t, a in rebuilt.items()} == {t: original[t] for t in rebuilt}
    objects = lost.bucket.client.list_objects_v2(Bucket=lost.bucket.name)["Contents"]
    assert sorted(o["Key"] for o in objects) == sorted(a.storage_key for a in rebuilt.values())


async def test_instances_sweeping_at_once_write_each_lost_file_once(
    uow: SqlUnitOfWorkFactory, db_engine: AsyncEngine, lost: LostFiles
) -> None:
    await lost.gate.open()
    # Each instance has its own repairer and its own locks, shared only through the database.
    instances = [
        OutcomeArtifactRepair(uow, lost.store, utc_now, locks=DatabaseRecoveryLocks(db_engine))
        for _ in range(3)
    ]

    reports = await asyncio.gather(*(instance.sweep() for instance in instances))
    after = await _files(uow, lost.run)

    assert sum(r.rebuilt for r in reports) == 2
    ready = sorted(a.artifact_type for a in after if a.state is ArtifactState.READY)
    assert ready == ["RESULTS_EXPORT", "SUCCEEDED_ITEMS"]


async def test_a_run_another_repairer_holds_is_left_to_it(
    uow: SqlUnitOfWorkFactory, db_engine: AsyncEngine, lost: LostFiles
) -> None:
    await lost.gate.open()
    locks = DatabaseRecoveryLocks(db_engine)
    repair = OutcomeArtifactRepair(uow, lost.store, utc_now, locks=locks)

    async with locks.hold(lost.run.id) as mine:
        assert mine
        while_held = await repair.sweep()
        during = await _files(uow, lost.run)
    afterwards = await repair.sweep()

    assert while_held == RepairReport(held=1)
    assert all(a.state is ArtifactState.FAILED for a in during)
    assert afterwards.rebuilt == 2


async def test_an_expired_lost_file_stays_lost_and_one_no_result_belongs_in_becomes_history(
    uow: SqlUnitOfWorkFactory, lost: LostFiles
) -> None:
    run = lost.run
    files = {a.artifact_type: a for a in await _files(uow, run)}
    now = utc_now()
    no_such_outcome = Artifact(
        workspace_id=run.workspace_id,
        owner_type=ArtifactOwnerType.RUN,
        owner_id=run.id,
        artifact_type="UNKNOWN_ITEMS",
        state=ArtifactState.FAILED,
        storage_key=f"runs/{run.id}/{new_id()}.jsonl",
        content_type="application/x-ndjson",
        file_name="unknown.jsonl",
        expires_at=now + timedelta(days=90),
        created_at=now,
        updated_at=now,
    )
    async with uow() as unit:
        await unit.artifacts.update(replace(files["RESULTS_EXPORT"], expires_at=now - timedelta(seconds=1)))
        await unit.artifacts.add(no_such_outcome)
    await lost.gate.open()

    report = await OutcomeArtifactRepair(uow, lost.store, utc_now).sweep()
    after = await _files(uow, run)

    assert report == RepairReport(rebuilt=1, dropped=1)
    assert _states(after) == [
        ("RESULTS_EXPORT", ArtifactState.FAILED),
        ("RUN_LOG", ArtifactState.FAILED),
        ("SUCCEEDED_ITEMS", ArtifactState.FAILED),
        ("SUCCEEDED_ITEMS", ArtifactState.READY),
    ]
