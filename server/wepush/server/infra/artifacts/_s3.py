"""``S3ArtifactStore``: artifacts as objects in one bucket of an S3-compatible store (server mode).

Every Service instance sees the same objects, so an artifact written by one instance downloads from any
other. An object appears only when its upload completes: a small one with a single ``PutObject``, a
larger one as a multipart upload that is invisible until ``CompleteMultipartUpload``. Writes are buffered
one part at a time (8 MiB), so an upload's memory stays bounded whatever the artifact's size; an upload
whose writer died is aborted later by :meth:`S3ArtifactStore.reclaim_abandoned`. boto3 is synchronous:
every call runs in a worker thread, never on the event loop.

Every call is bounded (see :class:`Patience`): a bucket that accepts connections and never answers must
not hold a download, or the worker thread serving it, for botocore's defaults (60 s per attempt, five
attempts: six minutes), when readiness already knows the bucket is down.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Collection, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Final

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError, HTTPClientError
from botocore.exceptions import ConnectionError as EndpointUnreachable

from wepush.server.application.execution import ArtifactObjectMissing, ArtifactUpload, StoredObject
from wepush.server.config import S3Settings
from wepush.server.domain import ArtifactStoreUnreachable

from ._keys import GeneratedKeys, checked_key
from ._upload import HashingUpload, own

__all__ = ["ArtifactStoreUnavailable", "S3ArtifactStore"]

#: Parts of a multipart upload; S3 needs at least 5 MiB for every part but the last.
PART_BYTES: Final = 8 * 1024 * 1024
_READ_CHUNK: Final = 64 * 1024
_MISSING_CODES: Final = frozenset({"404", "NoSuchKey", "NotFound"})
_log = logging.getLogger("wepush.server.artifacts")


class ArtifactStoreUnavailable(RuntimeError):
    """The configured bucket cannot be used (unreachable, missing, or the credentials are refused)."""


def _code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))


def _server_error(error: ClientError) -> str | None:
    """``<code> (HTTP <status>)`` when the bucket answered with a server error (5xx), else ``None``."""
    status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    if not isinstance(status, int) or status < 500:
        return None
    return f"{_code(error) or 'server error'} (HTTP {status})"


@contextlib.contextmanager
def _reading(bucket: str, operation: str) -> Iterator[None]:
    """Turns a bucket that cannot be reached (no connection, a connect or read timeout, a connection cut
    mid-body) or that answers 5xx into :class:`ArtifactStoreUnreachable`, after boto's own retries: the
    request reading it is answered 503, not 500 with botocore's traceback, and nothing above this layer
    needs to know botocore. Every other error (a missing object, refused credentials) is left as it is.
    """
    try:
        yield
    except (EndpointUnreachable, HTTPClientError) as exc:
        raise _unreachable(bucket, operation, exc.__class__.__name__) from None
    except ClientError as exc:
        server_error = _server_error(exc)
        if server_error is None:
            raise
        raise _unreachable(bucket, operation, server_error) from None


def _unreachable(bucket: str, operation: str, reason: str) -> ArtifactStoreUnreachable:
    # One line, no traceback: the class or code says what happened (botocore's own messages add the
    # endpoint URL and the object key, and its traceback says nothing an operator can act on).
    _log.warning(
        "the artifact bucket %r could not be read (%s): %s",
        bucket,
        operation,
        reason,
        extra={"event": "ARTIFACT_STORE_UNREACHABLE"},
    )
    return ArtifactStoreUnreachable()


class _S3Upload(HashingUpload):
    """Sends a part each time a whole one is buffered."""

    def __init__(self, key: str, client: Any, bucket: str, part_bytes: int, still_open: set[str]) -> None:
        super().__init__(key)
        self._client = client
        self._bucket = bucket
        self._part_bytes = part_bytes
        self._still_open = still_open
        self.upload_id: str | None = None
        self.parts: list[dict[str, Any]] = []

    async def write(self, data: bytes) -> None:
        self.accept(data)
        while len(self.buffer) >= self._part_bytes:
            part = bytes(self.buffer[: self._part_bytes])
            del self.buffer[: self._part_bytes]
            await self.send_part(part)

    async def send_part(self, data: bytes) -> None:
        if self.upload_id is None:
            started = await asyncio.to_thread(
                self._client.create_multipart_upload, Bucket=self._bucket, Key=self._key
            )
            self.upload_id = str(started["UploadId"])
            self._still_open.add(self.upload_id)
        number = len(self.parts) + 1
        sent = await asyncio.to_thread(
            self._client.upload_part,
            Bucket=self._bucket,
            Key=self._key,
            UploadId=self.upload_id,
            PartNumber=number,
            Body=data,
        )
        self.parts.append({"PartNumber": number, "ETag": sent["ETag"]})


@dataclass(frozen=True, slots=True)
class Patience:
    """How long one client waits for the bucket: seconds to connect, seconds without a byte from it
    (for the answer, and again for each chunk of a body, so a large object streams for as long as its
    chunks keep coming), and how many attempts a call makes in all."""

    connect_s: float
    read_s: float
    attempts: int

    def config(self) -> Config:
        return Config(
            connect_timeout=self.connect_s,
            read_timeout=self.read_s,
            retries={"mode": "standard", "total_max_attempts": self.attempts},
        )


#: A bucket check (readiness, start-up): asked often, answered at once, tried once.
PROBE_PATIENCE: Final = Patience(connect_s=2.0, read_s=2.0, attempts=1)
#: Reads and deletes: a download waits on them, so a bucket that stopped answering is a 503 within
#: about ten seconds (two attempts), before a proxy in front gives up on the request.
READ_PATIENCE: Final = Patience(connect_s=2.0, read_s=5.0, attempts=2)
#: Uploads: nobody waits on them but the run writing its files, and a bucket may take a while to answer a
#: part or to assemble a multipart object; still bounded, so a bucket that hangs costs a run's file
#: about forty seconds before it is given up, not minutes.
UPLOAD_PATIENCE: Final = Patience(connect_s=2.0, read_s=20.0, attempts=2)


class S3ArtifactStore(GeneratedKeys):
    """The :class:`~wepush.server.application.execution.ArtifactStore` on an S3-compatible bucket."""

    def __init__(
        self,
        client: Any,
        bucket: str,
        *,
        part_bytes: int = PART_BYTES,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        probe_client: Any | None = None,
        upload_client: Any | None = None,
    ) -> None:
        """``client`` reads and deletes; ``probe_client`` checks the bucket and ``upload_client`` writes
        objects (both ``client`` unless given): each with the patience its callers can afford."""
        self._client = client
        # Readiness asks often and must answer fast: a bucket endpoint that stops answering would hold
        # each probe's worker thread for the data client's timeouts and retries, until the thread pool
        # that artifact I/O shares is full.
        self._probe_client = probe_client if probe_client is not None else client
        self._upload_client = upload_client if upload_client is not None else client
        self._bucket = bucket
        self._part_bytes = part_bytes
        self._clock = clock
        # Multipart uploads this store is still writing: never reclaimed, however long since their last part.
        self._open: set[str] = set()

    @classmethod
    def from_settings(cls, settings: S3Settings) -> S3ArtifactStore:
        if not settings.bucket:
            raise ArtifactStoreUnavailable("wepush.artifacts.s3.bucket is not set")
        config = Config(
            signature_version="s3v4",
            # Custom endpoints (MinIO, Ceph, moto …) rarely resolve virtual-hosted bucket names.
            s3={"addressing_style": "path"} if settings.endpoint_url else None,
        )
        # Explicit credentials when configured; otherwise boto3's own chain (environment, profile, role).
        session = boto3.session.Session()

        def client(patience: Patience) -> Any:
            return session.client(
                "s3",
                endpoint_url=settings.endpoint_url,
                region_name=settings.region,
                aws_access_key_id=settings.access_key_id,
                aws_secret_access_key=settings.secret_access_key,
                config=config.merge(patience.config()),
            )

        return cls(
            client(READ_PATIENCE),
            settings.bucket,
            probe_client=client(PROBE_PATIENCE),
            upload_client=client(UPLOAD_PATIENCE),
        )

    def __repr__(self) -> str:
        return f"S3ArtifactStore(bucket={self._bucket!r})"

    async def check(self) -> None:
        """Fail closed at start-up when the bucket cannot be used, naming the bucket and the reason."""
        try:
            await asyncio.to_thread(self._probe_client.head_bucket, Bucket=self._bucket)
        except ClientError as exc:
            raise ArtifactStoreUnavailable(
                f"the artifact bucket {self._bucket!r} cannot be used: {_code(exc) or 'refused'}"
            ) from None
        except BotoCoreError as exc:
            raise ArtifactStoreUnavailable(
                f"the artifact bucket {self._bucket!r} cannot be reached: {exc.__class__.__name__}"
            ) from None

    async def begin_upload(self, key: str) -> ArtifactUpload:
        return _S3Upload(checked_key(key), self._upload_client, self._bucket, self._part_bytes, self._open)

    async def complete(self, upload: ArtifactUpload) -> StoredObject:
        s3 = own(upload, _S3Upload)
        s3.finished = True
        try:
            if s3.upload_id is None:
                await asyncio.to_thread(
                    self._upload_client.put_object, Bucket=self._bucket, Key=s3.key, Body=s3.take_buffer()
                )
            else:
                if s3.buffer:
                    await s3.send_part(s3.take_buffer())
                await asyncio.to_thread(
                    self._upload_client.complete_multipart_upload,
                    Bucket=self._bucket,
                    Key=s3.key,
                    UploadId=s3.upload_id,
                    MultipartUpload={"Parts": s3.parts},
                )
        except BaseException:
            await self._abort_multipart(s3)
            raise
        self._open.discard(s3.upload_id or "")
        return StoredObject(s3.key, s3.size, s3.digest.hexdigest())

    async def abort(self, upload: ArtifactUpload) -> None:
        s3 = own(upload, _S3Upload)
        s3.finished = True
        s3.take_buffer()
        await self._abort_multipart(s3)

    async def _abort_multipart(self, s3: _S3Upload) -> None:
        if s3.upload_id is None:
            return
        self._open.discard(s3.upload_id)
        # What cannot be aborted now is aborted by the next reclaim_abandoned sweep.
        with contextlib.suppress(ClientError, BotoCoreError):
            await asyncio.to_thread(
                self._client.abort_multipart_upload, Bucket=self._bucket, Key=s3.key, UploadId=s3.upload_id
            )

    async def stat(self, key: str) -> StoredObject | None:
        try:
            with _reading(self._bucket, "head_object"):
                head = await asyncio.to_thread(
                    self._client.head_object, Bucket=self._bucket, Key=checked_key(key)
                )
        except ClientError as exc:
            if _code(exc) in _MISSING_CODES:
                return None
            raise
        return StoredObject(key, int(head["ContentLength"]))

    async def open_range(self, key: str, start: int, end: int) -> AsyncIterator[bytes]:
        if start < 0 or end < start:
            raise ValueError("a byte range needs 0 <= start <= end")
        checked_key(key)
        if end == start:
            if await self.stat(key) is None:
                raise ArtifactObjectMissing(key)
            return _empty()
        try:
            with _reading(self._bucket, "get_object"):
                got = await asyncio.to_thread(
                    self._client.get_object, Bucket=self._bucket, Key=key, Range=f"bytes={start}-{end - 1}"
                )
        except ClientError as exc:
            if _code(exc) in _MISSING_CODES:
                raise ArtifactObjectMissing(key) from None
            if _code(exc) == "InvalidRange" and await self.stat(key) is not None:
                return _empty()  # the range starts at or after the end of the object
            raise
        return _read(got["Body"], self._bucket)

    async def delete(self, key: str) -> bool:
        if await self.stat(key) is None:
            return False
        await asyncio.to_thread(self._client.delete_object, Bucket=self._bucket, Key=key)
        return True

    async def reclaim_abandoned(self, older_than: timedelta, *, in_use: Collection[str] = ()) -> int:
        """Abort multipart uploads nobody has added a part to for ``older_than``: their writer died.

        An upload's age is that of its last part (or of its start, before the first one), not of its
        start alone: a run writes its outcome files for as long as it sends, which can be days. Uploads
        this store is still writing, uploads to keys ``in_use`` (another instance's, by the database), and
        keys that are not this store's, are never touched."""
        return await asyncio.to_thread(
            self._reclaim, self._clock() - older_than, frozenset(self._open), frozenset(in_use)
        )

    def _reclaim(self, cutoff: datetime, still_open: frozenset[str], in_use: frozenset[str]) -> int:
        aborted = 0
        for page in self._client.get_paginator("list_multipart_uploads").paginate(Bucket=self._bucket):
            for upload in page.get("Uploads", []):
                key, upload_id = str(upload["Key"]), str(upload["UploadId"])
                try:
                    checked_key(key)
                except ValueError:
                    continue  # not one of ours: the bucket may be shared
                if upload_id in still_open or key in in_use or upload["Initiated"] >= cutoff:
                    continue
                if self._last_part_at(key, upload_id, upload["Initiated"]) >= cutoff:
                    continue
                self._client.abort_multipart_upload(Bucket=self._bucket, Key=key, UploadId=upload_id)
                aborted += 1
        return aborted

    def _last_part_at(self, key: str, upload_id: str, initiated: datetime) -> datetime:
        latest = initiated
        pages = self._client.get_paginator("list_parts").paginate(
            Bucket=self._bucket, Key=key, UploadId=upload_id
        )
        for page in pages:
            for part in page.get("Parts", []):
                latest = max(latest, part["LastModified"])
        return latest


async def _empty() -> AsyncIterator[bytes]:
    return
    yield b""  # pragma: no cover - makes this an async generator


async def _read(body: Any, bucket: str) -> AsyncIterator[bytes]:
    try:
        while True:
            # The connection may also break (or time out) after the first bytes.
            with _reading(bucket, "reading an object"):
                chunk = await asyncio.to_thread(body.read, _READ_CHUNK)
            if not chunk:
                return
            yield chunk
    finally:
        await asyncio.to_thread(body.close)
