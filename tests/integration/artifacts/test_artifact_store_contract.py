"""Both artifact stores keep the same promises: the local directory (standalone) and an S3 bucket (server
mode, on moto's server over loopback). Small objects and multipart ones, ranges, aborts, deletes, keys,
and the sweep of uploads whose writer died."""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import socket
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.fixtures.s3 import SECRET_KEY, S3Bucket
from wepush.server.application.execution import ArtifactObjectMissing, ArtifactStore
from wepush.server.config import S3Settings
from wepush.server.domain import ArtifactOwnerType, new_id
from wepush.server.infra.artifacts import ArtifactStoreUnavailable, LocalArtifactStore, S3ArtifactStore

#: The smallest part S3 accepts, so the multipart path is taken by a test-sized payload.
PART = 5 * 1024 * 1024
LARGE = b"".join(f'{{"line":{n},"pad":"{"x" * 40}"}}\n'.encode() for n in range(200_000))  # ~12 MiB
SMALL = b'{"itemId":"13800000001","state":"SUCCEEDED"}\n' * 3


@pytest.fixture(params=["local", "s3"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> ArtifactStore:
    if request.param == "local":
        return LocalArtifactStore(tmp_path / "artifacts")
    bucket: S3Bucket = request.getfixturevalue("s3_bucket")
    return S3ArtifactStore(bucket.client, bucket.name, part_bytes=PART)


def _key(store: ArtifactStore, run_id: str | None = None) -> str:
    return store.new_key(
        workspace_id="ws",
        owner_type=ArtifactOwnerType.RUN,
        owner_id=run_id or new_id(),
        artifact_id=new_id(),
        extension="jsonl",
    )


async def _read(store: ArtifactStore, key: str, start: int, end: int) -> bytes:
    chunks: AsyncIterator[bytes] = await store.open_range(key, start, end)
    return b"".join([chunk async for chunk in chunks])


async def _upload(store: ArtifactStore, key: str, payload: bytes, *, piece: int = 300_000) -> None:
    upload = await store.begin_upload(key)
    for start in range(0, len(payload), piece):
        await upload.write(payload[start : start + piece])
    stored = await store.complete(upload)
    assert (stored.size_bytes, stored.sha256) == (len(payload), hashlib.sha256(payload).hexdigest())


@pytest.mark.parametrize("payload", [SMALL, LARGE], ids=["single", "multipart"])
async def test_an_object_is_invisible_until_completed_then_whole(
    store: ArtifactStore, payload: bytes
) -> None:
    key = _key(store)
    upload = await store.begin_upload(key)
    for start in range(0, len(payload), 1_000_000):
        await upload.write(payload[start : start + 1_000_000])
        assert await store.stat(key) is None
    assert upload.size_bytes == len(payload)
    stored = await store.complete(upload)
    assert stored.sha256 == hashlib.sha256(payload).hexdigest()
    stat = await store.stat(key)
    assert stat is not None
    assert stat.size_bytes == len(payload)
    assert await _read(store, key, 0, len(payload)) == payload


async def test_ranges_return_exactly_the_requested_bytes(store: ArtifactStore) -> None:
    key = _key(store)
    await _upload(store, key, LARGE)
    size = len(LARGE)
    for start, end in [(0, 1), (7, 4242), (PART - 3, PART + 3), (size - 10, size), (size - 5, size + 100)]:
        assert await _read(store, key, start, end) == LARGE[start:end]
    assert await _read(store, key, 100, 100) == b""
    assert await _read(store, key, size, size + 10) == b""


async def test_an_aborted_upload_leaves_nothing_behind(store: ArtifactStore) -> None:
    key = _key(store)
    upload = await store.begin_upload(key)
    await upload.write(LARGE)  # past one part: on S3 a multipart upload exists now
    await store.abort(upload)
    assert await store.stat(key) is None
    assert await store.reclaim_abandoned(timedelta(0)) == 0
    with pytest.raises(RuntimeError):
        await upload.write(b"more")


async def test_delete_is_idempotent_and_a_missing_object_reads_as_missing(store: ArtifactStore) -> None:
    key = _key(store)
    await _upload(store, key, SMALL)
    assert await store.delete(key) is True
    assert await store.delete(key) is False
    assert await store.stat(key) is None
    with pytest.raises(ArtifactObjectMissing):
        await store.open_range(key, 0, 10)
    with pytest.raises(ArtifactObjectMissing):
        await store.open_range(key, 0, 0)


@pytest.mark.parametrize(
    "key", ["../etc/passwd", "runs/../../x.jsonl", "runs/a/b.JSONL", "other/a/b.jsonl", "/runs/a/b.jsonl"]
)
async def test_keys_the_store_did_not_generate_are_refused(store: ArtifactStore, key: str) -> None:
    with pytest.raises(ValueError, match="not a key this store generated"):
        await store.begin_upload(key)
    with pytest.raises(ValueError, match="not a key this store generated"):
        await store.stat(key)


def _sweeper(store: ArtifactStore, request: pytest.FixtureRequest, hours_later: float) -> ArtifactStore:
    """Another instance on the same directory or bucket, whose clock reads ``hours_later`` from now."""
    if isinstance(store, LocalArtifactStore):
        return LocalArtifactStore(store.root, clock=lambda: time.time() + hours_later * 3600)
    bucket: S3Bucket = request.getfixturevalue("s3_bucket")
    return S3ArtifactStore(
        bucket.client,
        bucket.name,
        part_bytes=PART,
        clock=lambda: datetime.now(UTC) + timedelta(hours=hours_later),
    )


async def test_an_upload_whose_writer_died_is_reclaimed_once_untouched_for_long_enough(
    store: ArtifactStore, request: pytest.FixtureRequest
) -> None:
    upload = await store.begin_upload(_key(store))
    await upload.write(LARGE)  # on S3 past one part: a multipart upload with a part exists now
    # The writer dies here; other instances sweep. Age counts from the last write, not from the start.
    try:
        assert await _sweeper(store, request, 0).reclaim_abandoned(timedelta(hours=1)) == 0
        assert await _sweeper(store, request, 2).reclaim_abandoned(timedelta(hours=3)) == 0
        assert await _sweeper(store, request, 2).reclaim_abandoned(timedelta(hours=1)) == 1
        assert await _sweeper(store, request, 2).reclaim_abandoned(timedelta(hours=1)) == 0
    finally:
        await store.abort(upload)  # harmless once reclaimed


async def test_an_upload_its_store_is_still_writing_is_never_reclaimed(store: ArtifactStore) -> None:
    key = _key(store)
    upload = await store.begin_upload(key)
    await upload.write(LARGE)
    # A run writes its outcome files for as long as it sends (days, at a low rate); its own sweep
    # must not take them away, however old their last part is.
    assert await store.reclaim_abandoned(timedelta(0)) == 0
    await upload.write(SMALL)
    await store.complete(upload)
    assert await _read(store, key, 0, len(LARGE) + len(SMALL)) == LARGE + SMALL


async def test_the_sweep_leaves_uploads_of_other_programs_in_a_shared_bucket(s3_bucket: S3Bucket) -> None:
    foreign = s3_bucket.client.create_multipart_upload(Bucket=s3_bucket.name, Key="backups/db.tar")
    store = S3ArtifactStore(s3_bucket.client, s3_bucket.name)
    assert await store.reclaim_abandoned(timedelta(0)) == 0
    uploads = s3_bucket.client.list_multipart_uploads(Bucket=s3_bucket.name)["Uploads"]
    assert [u["UploadId"] for u in uploads] == [foreign["UploadId"]]


async def test_a_bucket_the_service_cannot_use_stops_it_naming_the_bucket_not_the_credentials(
    s3_endpoint: str,
) -> None:
    settings = S3Settings(
        endpoint_url=s3_endpoint,
        bucket="no-such-bucket",
        region="us-east-1",
        access_key_id="wepush-test-access",
        secret_access_key=SECRET_KEY,
        presign_ttl=timedelta(minutes=15),
    )
    store = S3ArtifactStore.from_settings(settings)
    with pytest.raises(ArtifactStoreUnavailable) as raised:
        await store.check()
    assert "'no-such-bucket'" in str(raised.value)
    assert SECRET_KEY not in str(raised.value)
    assert SECRET_KEY not in repr(store)
    unreachable = S3ArtifactStore.from_settings(
        dataclasses.replace(settings, endpoint_url=f"http://127.0.0.1:{_closed_port()}")
    )
    with pytest.raises(ArtifactStoreUnavailable, match="cannot be reached"):
        await unreachable.check()


async def test_a_bucket_endpoint_that_stops_answering_fails_the_check_after_one_short_try() -> None:
    """Readiness probes ask often: against an endpoint that accepts connections and never answers, each
    check tries once with short timeouts, instead of holding a worker thread through the data client's
    five attempts of a minute each while more probes pile up behind it."""
    connections = 0
    held: list[asyncio.StreamWriter] = []

    async def black_hole(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        held.append(writer)  # read nothing, answer nothing, keep the connection open

    server = await asyncio.start_server(black_hole, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    settings = S3Settings(
        endpoint_url=f"http://127.0.0.1:{port}",
        bucket="artifacts",
        region="us-east-1",
        access_key_id="wepush-test-access",
        secret_access_key=SECRET_KEY,
        presign_ttl=timedelta(minutes=15),
    )
    try:
        with pytest.raises(ArtifactStoreUnavailable, match="cannot be reached"):
            await S3ArtifactStore.from_settings(settings).check()
    finally:
        for writer in held:
            writer.close()
        server.close()
        await server.wait_closed()
    assert connections == 1


def _closed_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


async def test_an_idle_upload_the_database_says_is_still_written_is_never_reclaimed_on_s3(
    s3_bucket: S3Bucket,
) -> None:
    # Another instance's run, paused for a day: idle, but not abandoned. Its key is in use.
    writer = S3ArtifactStore(s3_bucket.client, s3_bucket.name, part_bytes=PART)
    key = _key(writer)
    upload = await writer.begin_upload(key)
    await upload.write(LARGE)
    sweeper = S3ArtifactStore(
        s3_bucket.client,
        s3_bucket.name,
        part_bytes=PART,
        clock=lambda: datetime.now(UTC) + timedelta(hours=48),
    )
    try:
        assert await sweeper.reclaim_abandoned(timedelta(hours=24), in_use={key}) == 0
        assert await sweeper.reclaim_abandoned(timedelta(hours=24)) == 1
    finally:
        await writer.abort(upload)
