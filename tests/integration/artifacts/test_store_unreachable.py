"""The S3 store's reads say "the store cannot be reached" (ArtifactStoreUnreachable, 503 at the API) for
a bucket answering 5xx or a connection that breaks mid-body, and nothing else: a missing object is still
"missing", refused credentials are still an error of their own. botocore's Stubber answers a real
client here, as the bucket would (moto cannot be made to answer 5xx or to break a body off)."""

from __future__ import annotations

import io
import logging
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError
from botocore.response import StreamingBody
from botocore.stub import Stubber
from urllib3.exceptions import ReadTimeoutError

from tests.fixtures.s3 import s3_client
from wepush.server.application.execution import ArtifactObjectMissing
from wepush.server.domain import ArtifactStoreUnreachable
from wepush.server.infra.artifacts import S3ArtifactStore

BUCKET = "wepush-stubbed"
KEY = "runs/r1/a1.jsonl"


@pytest.fixture
def stubbed() -> Iterator[tuple[S3ArtifactStore, Stubber]]:
    # Never contacted: the Stubber answers every call before it would leave the process.
    client = s3_client("http://127.0.0.1:9")
    with Stubber(client) as stubber:
        yield S3ArtifactStore(client, BUCKET), stubber
        stubber.assert_no_pending_responses()


def _error(stubber: Stubber, operation: str, code: str, status: int) -> None:
    stubber.add_client_error(operation, service_error_code=code, http_status_code=status)


async def test_a_bucket_answering_5xx_is_unreachable_with_one_warning(
    stubbed: tuple[S3ArtifactStore, Stubber], caplog: pytest.LogCaptureFixture
) -> None:
    store, stubber = stubbed
    _error(stubber, "head_object", "ServiceUnavailable", 503)
    _error(stubber, "get_object", "InternalError", 500)
    caplog.set_level(logging.WARNING, logger="wepush.server.artifacts")

    with pytest.raises(ArtifactStoreUnreachable) as stat_failed:
        await store.stat(KEY)
    with pytest.raises(ArtifactStoreUnreachable):
        await store.open_range(KEY, 0, 10)

    assert stat_failed.value.code == "SERVICE_NOT_READY"
    assert stat_failed.value.__suppress_context__  # botocore stays below the store
    messages = [(r.levelno, r.getMessage(), r.exc_info) for r in caplog.records]
    assert messages == [
        (
            logging.WARNING,
            f"the artifact bucket {BUCKET!r} could not be read (head_object): ServiceUnavailable (HTTP 503)",
            None,
        ),
        (
            logging.WARNING,
            f"the artifact bucket {BUCKET!r} could not be read (get_object): InternalError (HTTP 500)",
            None,
        ),
    ]


async def test_a_missing_object_and_refused_credentials_keep_their_own_errors(
    stubbed: tuple[S3ArtifactStore, Stubber],
) -> None:
    store, stubber = stubbed
    _error(stubber, "head_object", "404", 404)
    _error(stubber, "get_object", "NoSuchKey", 404)
    _error(stubber, "head_object", "AccessDenied", 403)

    assert await store.stat(KEY) is None
    with pytest.raises(ArtifactObjectMissing):
        await store.open_range(KEY, 0, 10)
    with pytest.raises(ClientError):
        await store.stat(KEY)


class _BreaksAfter(io.RawIOBase):
    """A response body whose connection times out after its first bytes."""

    def __init__(self, first: bytes) -> None:
        self._first = first

    def read(self, size: int | None = -1) -> bytes:
        if self._first:
            data, self._first = self._first, b""
            return data
        raise ReadTimeoutError(None, "", "Read timed out.")  # type: ignore[arg-type]


async def _drain(chunks: AsyncIterator[bytes], into: list[bytes]) -> None:
    async for chunk in chunks:
        into.append(chunk)


async def test_a_body_cut_off_midway_is_unreachable_after_the_bytes_already_read(
    stubbed: tuple[S3ArtifactStore, Stubber],
) -> None:
    store, stubber = stubbed
    body: Any = StreamingBody(_BreaksAfter(b"0123456789"), 100)
    stubber.add_response("get_object", {"Body": body, "ContentLength": 100})

    received: list[bytes] = []
    chunks = await store.open_range(KEY, 0, 100)
    with pytest.raises(ArtifactStoreUnreachable):
        await _drain(chunks, received)
    assert received == [b"0123456789"]
