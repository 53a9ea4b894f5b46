"""The result artifacts a run writes: each outcome file holds exactly the items' JSON lines, and the CSV
export is what the engine's reference ``csv_export`` makes of the same items, formula-safe."""

from __future__ import annotations

import asyncio
import io
import json
from datetime import timedelta

import pytest

from tests.fixtures.s3 import S3Bucket
from tests.integration.execution._world import World, artifacts_of, build_world, create_run
from wepush.agent.engine import (
    ErrorCategory,
    ItemResult,
    ItemState,
    RecipientRecord,
    csv_export,
)
from wepush.server.application.execution import (
    ArtifactDownloads,
    ArtifactStore,
    ArtifactUpload,
    ResultArtifacts,
    RetentionPolicy,
    RunArtifactWriter,
    StoredObject,
    plain_transactions,
)
from wepush.server.domain import Run, utc_now
from wepush.server.infra.artifacts import LocalArtifactStore, S3ArtifactStore
from wepush.server.infra.db import SqlUnitOfWorkFactory
from wepush.server.infra.secrets import LocalEnvelopeSecretStore

_TRICKY = ['=HYPERLINK("x")', "+1", "-2", "@sum", "\tlead", "plain, with comma", 'quote "q"', "中文"]


def _items(run_id: str, count: int) -> list[ItemResult]:
    start = utc_now()
    items = []
    for n in range(1, count + 1):
        state = (ItemState.SUCCEEDED, ItemState.FAILED, ItemState.UNKNOWN, ItemState.UNSENT)[n % 4]
        record = RecipientRecord.of(
            f"item-{n}",
            n,
            {"name": _TRICKY[n % len(_TRICKY)], "mobile": f"=1380000{n:04d}", "vip": n % 2 == 0, "n": n},
        )
        failed = state is not ItemState.SUCCEEDED
        items.append(
            ItemResult(
                run_id=run_id,
                item_id=record.item_id,
                sequence=n,
                state=state,
                attempt=0 if state is ItemState.UNSENT else 1 + n % 3,
                error_category=ErrorCategory.TEMPORARY_REMOTE if failed else None,
                provider_code="=HTTP_503" if failed else "OK",
                diagnostic=_TRICKY[(n + 3) % len(_TRICKY)] if failed else None,
                external_request_id=None if failed else f"@ext-{n}",
                started_at=None if state is ItemState.UNSENT else start + timedelta(milliseconds=n),
                finished_at=start + timedelta(milliseconds=2 * n + 1),
                recipient=record.fields,
            )
        )
    return items


@pytest.fixture(params=["local", "s3"])
def store(request: pytest.FixtureRequest, artifact_store: LocalArtifactStore) -> ArtifactStore:
    """The run's artifacts go to the local store (standalone) or to an S3 bucket (server mode)."""
    if request.param == "local":
        return artifact_store
    bucket: S3Bucket = request.getfixturevalue("s3_bucket")
    # The smallest part S3 accepts: the larger outcome files go up as multipart uploads.
    return S3ArtifactStore(bucket.client, bucket.name, part_bytes=5 * 1024 * 1024)


def _result_artifacts(uow: SqlUnitOfWorkFactory, store: ArtifactStore, run: Run) -> ResultArtifacts:
    writer = RunArtifactWriter(
        store=store,
        tx=plain_transactions(uow),
        workspace_id=run.workspace_id,
        run_id=run.id,
        clock=utc_now,
        retention=RetentionPolicy(),
    )
    return ResultArtifacts(writer)


@pytest.fixture
async def world(uow: SqlUnitOfWorkFactory, secret_store: LocalEnvelopeSecretStore) -> World:
    return await build_world(uow, secret_store, recipients=1)


async def test_outcome_files_and_the_csv_export_match_the_engines_formats(
    uow: SqlUnitOfWorkFactory, store: ArtifactStore, world: World
) -> None:
    run = await create_run(uow, world)
    sink = _result_artifacts(uow, store, run)
    # Enough items for several chunks per file.
    items = _items(run.id, 3000)
    for item in items:
        await sink.write(item)
    refs = await sink.close()

    downloads = ArtifactDownloads(uow, store)
    stored = await artifacts_of(uow, run)

    async def content(kind: str) -> str:
        opened = await downloads.open_artifact(run.workspace_id, run.id, stored[kind].id)
        return b"".join([chunk async for chunk in opened.chunks]).decode("utf-8")

    for state, kind in (
        (ItemState.SUCCEEDED, "SUCCEEDED_ITEMS"),
        (ItemState.FAILED, "FAILED_ITEMS"),
        (ItemState.UNKNOWN, "UNKNOWN_ITEMS"),
        (ItemState.UNSENT, "UNSENT_ITEMS"),
    ):
        expected = "".join(i.to_json_line() + "\n" for i in items if i.state is state)
        assert await content(kind) == expected
    reference = io.StringIO()
    csv_export(items, reference)
    # With a byte-order mark, as the import errors CSV, so that Excel reads it as UTF-8.
    assert await content("RESULTS_EXPORT") == "\ufeff" + reference.getvalue()
    assert "'=HYPERLINK" in reference.getvalue()
    counts = {ref.kind: ref.record_count for ref in refs}
    assert counts == {
        "SUCCEEDED_ITEMS": 750,
        "FAILED_ITEMS": 750,
        "UNKNOWN_ITEMS": 750,
        "UNSENT_ITEMS": 750,
        "RESULTS_EXPORT": 3000,
    }
    assert json.loads((await content("SUCCEEDED_ITEMS")).splitlines()[0])["sequence"] == 4


class SlowToComplete(LocalArtifactStore):
    """A store whose completions each wait until ``together`` of them are under way at once: a run's
    end that completes its files one after another never gets past the first."""

    def __init__(self, root: object, together: int) -> None:
        super().__init__(str(root))
        self._together = together
        self._waiting = 0
        self._all_there = asyncio.Event()

    async def complete(self, upload: ArtifactUpload) -> StoredObject:
        self._waiting += 1
        if self._waiting == self._together:
            self._all_there.set()
        await self._all_there.wait()
        return await super().complete(upload)


async def test_a_run_s_files_are_completed_side_by_side_not_one_after_another(
    uow: SqlUnitOfWorkFactory, artifact_store: LocalArtifactStore, world: World
) -> None:
    # A bucket that hangs costs each completion its full patience (about 40 s): one after another, a run
    # with five files waited over three minutes for its terminal state.
    run = await create_run(uow, world)
    sink = _result_artifacts(uow, SlowToComplete(artifact_store.root, together=5), run)
    for item in _items(run.id, 8):
        await sink.write(item)

    async with asyncio.timeout(30):  # only so that the sequential way fails rather than hangs
        refs = await sink.close()

    assert sorted(ref.kind for ref in refs) == sorted(
        ["SUCCEEDED_ITEMS", "FAILED_ITEMS", "UNKNOWN_ITEMS", "UNSENT_ITEMS", "RESULTS_EXPORT"]
    )
