"""LocalArtifactStore: atomic publication, private files, SHA-256, byte ranges, safe keys, idempotent delete."""

from __future__ import annotations

import hashlib
import os
import stat
import time
from datetime import timedelta
from pathlib import Path

import pytest

from wepush.server.application.execution import ArtifactObjectMissing, ArtifactStore
from wepush.server.domain import ArtifactOwnerType, new_id
from wepush.server.infra.artifacts import LocalArtifactStore

RUN_ID = new_id()


def _key(store: LocalArtifactStore, extension: str = "jsonl") -> str:
    return store.new_key(
        workspace_id="ws",
        owner_type=ArtifactOwnerType.RUN,
        owner_id=RUN_ID,
        artifact_id=new_id(),
        extension=extension,
    )


async def _collect(store: ArtifactStore, key: str, start: int, end: int) -> bytes:
    return b"".join([chunk async for chunk in await store.open_range(key, start, end)])


async def test_an_upload_is_invisible_until_completed_then_appears_whole_with_its_sha256(
    tmp_path: Path,
) -> None:
    store = LocalArtifactStore(tmp_path / "artifacts")
    key = _key(store)
    payload = b"".join(f'{{"line":{n}}}\n'.encode() for n in range(50_000))

    upload = await store.begin_upload(key)
    for offset in range(0, len(payload), 7_001):
        await upload.write(payload[offset : offset + 7_001])
    assert await store.stat(key) is None
    stored = await store.complete(upload)

    assert stored.size_bytes == len(payload) == upload.size_bytes
    assert stored.sha256 == hashlib.sha256(payload).hexdigest()
    assert (tmp_path / "artifacts" / key).read_bytes() == payload
    assert key == f"runs/{RUN_ID}/{key.rsplit('/', 1)[1]}"
    assert not list((tmp_path / "artifacts" / ".uploads").iterdir())


async def test_files_are_private_to_the_service_user(tmp_path: Path) -> None:
    store = LocalArtifactStore(tmp_path / "artifacts")
    key = _key(store)
    upload = await store.begin_upload(key)
    await upload.write(b"secret-ish results")
    await store.complete(upload)

    path = tmp_path / "artifacts" / key
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700


async def test_byte_ranges_return_exactly_the_requested_slice(tmp_path: Path) -> None:
    store = LocalArtifactStore(tmp_path)
    key = _key(store)
    payload = os.urandom(200_000)
    upload = await store.begin_upload(key)
    await upload.write(payload)
    await store.complete(upload)

    assert await _collect(store, key, 0, len(payload)) == payload
    assert await _collect(store, key, 1000, 1010) == payload[1000:1010]
    assert await _collect(store, key, 150_000, 400_000) == payload[150_000:]
    assert await _collect(store, key, 5, 5) == b""


async def test_an_aborted_upload_leaves_nothing_behind(tmp_path: Path) -> None:
    store = LocalArtifactStore(tmp_path)
    key = _key(store)
    upload = await store.begin_upload(key)
    await upload.write(b"partial")
    await store.abort(upload)

    assert await store.stat(key) is None
    assert not list((tmp_path / ".uploads").iterdir())
    with pytest.raises(RuntimeError):
        await upload.write(b"more")


async def test_delete_is_idempotent_and_a_missing_object_reads_as_missing(tmp_path: Path) -> None:
    store = LocalArtifactStore(tmp_path)
    key = _key(store, "csv")
    upload = await store.begin_upload(key)
    await upload.write(b"a,b\n")
    await store.complete(upload)

    assert await store.delete(key) is True
    assert await store.delete(key) is False
    assert await store.stat(key) is None
    with pytest.raises(ArtifactObjectMissing):
        await store.open_range(key, 0, 1)


@pytest.mark.parametrize(
    ("owner_id", "artifact_id", "extension"),
    [
        ("../etc", "a", "jsonl"),
        ("run", "a/b", "jsonl"),
        ("run", "a", "json l"),
        ("run", "..", "jsonl"),
        ("", "a", "csv"),
    ],
)
def test_keys_are_built_from_ids_only_and_refuse_path_tricks(
    tmp_path: Path, owner_id: str, artifact_id: str, extension: str
) -> None:
    store = LocalArtifactStore(tmp_path)
    with pytest.raises(ValueError, match="opaque ids"):
        store.new_key(
            workspace_id="ws",
            owner_type=ArtifactOwnerType.RUN,
            owner_id=owner_id,
            artifact_id=artifact_id,
            extension=extension,
        )


async def test_keys_the_store_did_not_generate_are_refused(tmp_path: Path) -> None:
    store = LocalArtifactStore(tmp_path / "root")
    (tmp_path / "outside.jsonl").write_bytes(b"not yours")
    for key in ("../outside.jsonl", "/etc/passwd", "runs/x/../../../outside.jsonl", "runs/a/b.jsonl/../c"):
        with pytest.raises(ValueError, match="key"):
            await store.stat(key)
        with pytest.raises(ValueError, match="key"):
            await store.delete(key)
    assert (tmp_path / "outside.jsonl").exists()


async def test_abandoned_uploads_are_reclaimed_only_when_old_enough(tmp_path: Path) -> None:
    store = LocalArtifactStore(tmp_path)
    old = await store.begin_upload(_key(store))
    await old.write(b"writer died")
    fresh = await store.begin_upload(_key(store))
    await fresh.write(b"still writing")
    parts = sorted((tmp_path / ".uploads").iterdir(), key=lambda p: p.stat().st_mtime)
    long_ago = time.time() - 2 * 86_400
    os.utime(parts[0], (long_ago, long_ago))

    # The sweep of another instance (after a restart, or another Service on the same directory).
    sweeper = LocalArtifactStore(tmp_path)
    assert await sweeper.reclaim_abandoned(timedelta(hours=24)) == 1
    assert await sweeper.reclaim_abandoned(timedelta(hours=24)) == 0
    assert len(list((tmp_path / ".uploads").iterdir())) == 1
    # The writer's own store never reclaims what it still has open, however old.
    assert await store.reclaim_abandoned(timedelta(0)) == 0
    await store.abort(fresh)
    await store.abort(old)
