"""Uploads wait for Retry-After after 429/503 and send the file again, when the SDK can send it again."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

from wepush.sdk.remote import Conflict, RateLimited, ServiceUnavailable, WePushClient

from ._service import WS, Action, ScriptedService, problem, reply, ws_path

CONTENT = ws_path("audiences", "aud-1", "imports", "imp-1", "content")
FILE = b"mobile\n" + b"".join(b"1380000%04d\n" % n for n in range(5000))


def staged() -> dict[str, Any]:
    return {
        "id": "imp-1",
        "audienceId": "aud-1",
        "state": "STAGED",
        "format": "CSV",
        "hasHeader": True,
        "delimiter": ",",
        "encoding": "utf-8",
        "fieldMapping": {"mobile": "mobile"},
        "dedupeKeys": ["mobile"],
        "counts": {"totalRows": 5000, "acceptedRows": 5000, "rejectedRows": 0, "duplicateRows": 0},
        "createdAt": "2026-08-22T08:30:00Z",
        "updatedAt": "2026-08-22T08:30:00Z",
        "expiresAt": "2026-08-23T08:30:00Z",
    }


def rate_limited() -> Action:
    return problem(429, "RATE_LIMITED", headers={"Retry-After": "0"})


def not_ready() -> Action:
    return problem(503, "SERVICE_NOT_READY", headers={"Retry-After": "0"})


class _Pipe(io.RawIOBase):
    """A stream that cannot rewind, like a pipe or a socket."""

    def __init__(self, data: bytes) -> None:
        self._data = io.BytesIO(data)

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def readinto(self, buffer: Any) -> int:
        chunk = self._data.read(len(buffer))
        buffer[: len(chunk)] = chunk
        return len(chunk)


@pytest.fixture
def csv_path(tmp_path: Path) -> Path:
    path = tmp_path / "audience.csv"
    path.write_bytes(FILE)
    return path


def _upload(client: WePushClient, source: Any) -> Any:
    return client.workspace(WS).audiences.upload("aud-1", "imp-1", source)


def test_a_path_is_sent_again_after_429_and_503(
    service: ScriptedService, client: WePushClient, csv_path: Path
) -> None:
    service.script("PUT", CONTENT, rate_limited(), not_ready(), reply(200, staged()))

    result = _upload(client, csv_path)

    assert result.state == "STAGED"
    bodies = [seen.body for seen in service.seen("PUT", CONTENT)]
    assert bodies == [FILE, FILE, FILE]


def test_bytes_are_sent_again_after_429(service: ScriptedService, client: WePushClient) -> None:
    service.script("PUT", CONTENT, rate_limited(), reply(200, staged()))

    _upload(client, FILE)

    assert [seen.body for seen in service.seen("PUT", CONTENT)] == [FILE, FILE]


def test_a_seekable_stream_is_rewound_to_where_it_stood(
    service: ScriptedService, client: WePushClient
) -> None:
    service.script("PUT", CONTENT, not_ready(), reply(200, staged()))
    stream = io.BytesIO(b"ignored preamble" + FILE)
    stream.seek(len(b"ignored preamble"))

    _upload(client, stream)

    assert [seen.body for seen in service.seen("PUT", CONTENT)] == [FILE, FILE]


def test_a_stream_that_cannot_rewind_is_not_retried(service: ScriptedService, client: WePushClient) -> None:
    service.script("PUT", CONTENT, rate_limited(), reply(200, staged()))

    with pytest.raises(RateLimited):
        _upload(client, io.BufferedReader(_Pipe(FILE)))

    assert len(service.seen("PUT", CONTENT)) == 1


def test_retries_stop_at_max_retries(service: ScriptedService, client: WePushClient, csv_path: Path) -> None:
    service.script("PUT", CONTENT, *(not_ready() for _ in range(5)))

    with pytest.raises(ServiceUnavailable):
        _upload(client, csv_path)

    # The fixture's client allows 3 retries after the first attempt.
    assert len(service.seen("PUT", CONTENT)) == 4


def test_a_wait_above_the_cap_is_raised_at_once(
    service: ScriptedService, client: WePushClient, csv_path: Path
) -> None:
    service.script("PUT", CONTENT, problem(429, "RATE_LIMITED", headers={"Retry-After": "3600"}))

    with pytest.raises(RateLimited) as raised:
        _upload(client, csv_path)

    assert raised.value.retry_after == 3600
    assert len(service.seen("PUT", CONTENT)) == 1


def test_a_business_refusal_is_never_retried(
    service: ScriptedService, client: WePushClient, csv_path: Path
) -> None:
    service.script("PUT", CONTENT, problem(409, "IMPORT_STATE_CONFLICT"), reply(200, staged()))

    with pytest.raises(Conflict):
        _upload(client, csv_path)

    assert len(service.seen("PUT", CONTENT)) == 1
