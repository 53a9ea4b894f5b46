"""Streamed audience uploads and artifact downloads over real connections."""

from __future__ import annotations

import gzip
import io
import re
import stat
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from wepush.sdk.remote import Conflict, InvalidResponse, ValidationFailed, WePushClient

from ._service import WS, Action, ScriptedService, cut, problem, reply, ws_path

CONTENT = ws_path("audiences", "aud-1", "imports", "imp-1", "content")
ERRORS = ws_path("audiences", "aud-1", "imports", "imp-1", "errors")
ARTIFACT = ws_path("runs", "run-1", "artifacts", "art-1", "content")
ARTIFACT_BYTES = b"".join(b'{"itemId":"customer-%05d","state":"SUCCEEDED"}\n' % n for n in range(4000))


def staged_import(rows: int) -> dict[str, Any]:
    return {
        "id": "imp-1",
        "audienceId": "aud-1",
        "state": "STAGED",
        "format": "CSV",
        "hasHeader": True,
        "delimiter": ",",
        "encoding": "utf-8",
        "fieldMapping": {"Mobile": "mobile"},
        "dedupeKeys": ["mobile"],
        "counts": {"totalRows": rows, "acceptedRows": rows, "rejectedRows": 0, "duplicateRows": 0},
        "createdAt": "2026-08-22T08:30:00Z",
        "updatedAt": "2026-08-22T08:30:00Z",
        "expiresAt": "2026-08-23T08:30:00Z",
    }


@pytest.fixture
def audience_csv(tmp_path: Path) -> Path:
    path = tmp_path / "audience.csv"
    rows = ["Mobile,Name"] + [f"1380000{n:04d},customer {n}" for n in range(20000)]
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def test_csv_upload_from_a_path_is_streamed_in_chunks(
    service: ScriptedService, client: WePushClient, audience_csv: Path
) -> None:
    service.script("PUT", CONTENT, reply(200, staged_import(20000)))

    staged = client.workspace(WS).audiences.upload("aud-1", "imp-1", audience_csv)

    assert staged.state == "STAGED"
    assert staged.counts.accepted_rows == 20000
    (received,) = service.seen("PUT", CONTENT)
    assert received.chunked
    assert "Content-Length" not in received.headers
    assert received.http_chunks > 1
    assert received.body == audience_csv.read_bytes()
    assert received.headers["Content-Type"] == "text/csv"


def test_txt_upload_from_a_binary_stream(service: ScriptedService, client: WePushClient) -> None:
    service.script("PUT", CONTENT, reply(200, staged_import(2)))
    stream = io.BytesIO(b"13800000001\n13800000002\n")

    client.workspace(WS).audiences.upload("aud-1", "imp-1", stream, file_format="TXT")

    (received,) = service.seen("PUT", CONTENT)
    assert received.chunked
    assert received.body == b"13800000001\n13800000002\n"
    assert received.headers["Content-Type"] == "text/plain"


def test_a_compressed_file_is_sent_as_it_is_with_its_content_encoding(
    service: ScriptedService, client: WePushClient, tmp_path: Path, audience_csv: Path
) -> None:
    service.script("PUT", CONTENT, reply(200, staged_import(20000)))
    compressed = tmp_path / "audience.csv.gz"
    compressed.write_bytes(gzip.compress(audience_csv.read_bytes()))

    client.workspace(WS).audiences.upload("aud-1", "imp-1", compressed, content_encoding="gzip")

    (received,) = service.seen("PUT", CONTENT)
    # aiohttp undoes the coding the header names: the CSV comes back only if gzip bytes travelled.
    assert received.headers["Content-Encoding"] == "gzip"
    assert received.body == audience_csv.read_bytes()
    assert received.headers["Content-Type"] == "text/csv"


def test_oversized_upload_is_refused_with_its_code(
    service: ScriptedService, client: WePushClient, audience_csv: Path
) -> None:
    service.script("PUT", CONTENT, problem(413, "PAYLOAD_TOO_LARGE"))

    with pytest.raises(ValidationFailed) as raised:
        client.workspace(WS).audiences.upload("aud-1", "imp-1", audience_csv)

    assert raised.value.code == "PAYLOAD_TOO_LARGE"
    assert len(service.seen("PUT", CONTENT)) == 1


def cut_after(cut_at: int, *, promised: int = len(ARTIFACT_BYTES)) -> Action:
    """Promise ``promised`` bytes, send the first ``cut_at`` of the artifact, then drop the connection."""

    async def action(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(
            status=200,
            headers={"Content-Type": "application/x-ndjson", "Content-Length": str(promised)},
        )
        await response.prepare(request)
        await response.write(ARTIFACT_BYTES[:cut_at])
        await cut(request)
        return response

    return action


def serve_range(*, honour: bool = True) -> Action:
    async def action(request: web.Request) -> web.StreamResponse:
        match = re.fullmatch(r"bytes=(\d+)-(\d*)", request.headers.get("Range", ""))
        if match is None or not honour:
            return web.Response(body=ARTIFACT_BYTES, content_type="application/x-ndjson")
        first = int(match.group(1))
        last = int(match.group(2)) if match.group(2) else len(ARTIFACT_BYTES) - 1
        return web.Response(
            status=206,
            body=ARTIFACT_BYTES[first : last + 1],
            content_type="application/x-ndjson",
            headers={"Content-Range": f"bytes {first}-{last}/{len(ARTIFACT_BYTES)}"},
        )

    return action


def test_artifact_download_resumes_from_the_first_missing_byte(
    service: ScriptedService, client: WePushClient, tmp_path: Path
) -> None:
    service.script("GET", ARTIFACT, cut_after(70000), serve_range())
    target = tmp_path / "succeeded.jsonl"

    result = client.workspace(WS).runs.download_artifact("run-1", "art-1", target)

    assert target.read_bytes() == ARTIFACT_BYTES
    assert result.bytes_written == len(ARTIFACT_BYTES)
    assert result.total_size == len(ARTIFACT_BYTES)
    first, resumed = service.seen("GET", ARTIFACT)
    assert "Range" not in first.headers
    resumed_from = re.fullmatch(r"bytes=(\d+)-", resumed.headers["Range"])
    assert resumed_from is not None
    assert 0 < int(resumed_from.group(1)) <= 70000


def test_drop_after_the_last_byte_completes_on_range_not_satisfiable(
    service: ScriptedService, client: WePushClient, tmp_path: Path
) -> None:
    size = len(ARTIFACT_BYTES)

    async def nothing_left(request: web.Request) -> web.StreamResponse:
        assert request.headers["Range"] == f"bytes={size}-"
        return web.Response(status=416, headers={"Content-Range": f"bytes */{size}"})

    service.script("GET", ARTIFACT, cut_after(size, promised=size + 1), nothing_left)
    target = tmp_path / "succeeded.jsonl"

    result = client.workspace(WS).runs.download_artifact("run-1", "art-1", target)

    assert target.read_bytes() == ARTIFACT_BYTES
    assert result.bytes_written == size
    assert len(service.seen("GET", ARTIFACT)) == 2


def test_artifact_byte_range_into_a_stream(service: ScriptedService, client: WePushClient) -> None:
    service.script("GET", ARTIFACT, serve_range())
    sink = io.BytesIO()

    result = client.workspace(WS).runs.download_artifact("run-1", "art-1", sink, range="bytes=100-199")

    assert sink.getvalue() == ARTIFACT_BYTES[100:200]
    assert result.bytes_written == 100


def test_resume_refused_when_the_server_ignores_the_range(
    service: ScriptedService, client: WePushClient, tmp_path: Path
) -> None:
    service.script("GET", ARTIFACT, cut_after(70000), serve_range(honour=False))
    target = tmp_path / "succeeded.jsonl"

    with pytest.raises(InvalidResponse):
        client.workspace(WS).runs.download_artifact("run-1", "art-1", target)

    assert not target.exists()


def test_artifact_not_ready_raises_conflict_and_leaves_no_file(
    service: ScriptedService, client: WePushClient, tmp_path: Path
) -> None:
    service.script("GET", ARTIFACT, problem(409, "ARTIFACT_NOT_READY"))
    target = tmp_path / "failed.jsonl"

    with pytest.raises(Conflict) as raised:
        client.workspace(WS).runs.download_artifact("run-1", "art-1", target)

    assert raised.value.code == "ARTIFACT_NOT_READY"
    assert not target.exists()


def test_a_failed_download_leaves_a_file_that_was_there_untouched(
    service: ScriptedService, client: WePushClient, tmp_path: Path
) -> None:
    service.script(
        "GET", ARTIFACT, problem(409, "ARTIFACT_NOT_READY"), cut_after(70000), serve_range(honour=False)
    )
    target = tmp_path / "failed.jsonl"
    target.write_bytes(b"yesterday's results\n")
    target.chmod(0o640)
    runs = client.workspace(WS).runs

    with pytest.raises(Conflict):
        runs.download_artifact("run-1", "art-1", target)
    with pytest.raises(InvalidResponse):
        runs.download_artifact("run-1", "art-1", target)

    assert target.read_bytes() == b"yesterday's results\n"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["failed.jsonl"]


def test_a_completed_download_replaces_the_file_keeping_its_mode(
    service: ScriptedService, client: WePushClient, tmp_path: Path
) -> None:
    service.script("GET", ARTIFACT, serve_range())
    target = tmp_path / "succeeded.jsonl"
    target.write_bytes(b"yesterday's results\n")
    target.chmod(0o640)

    client.workspace(WS).runs.download_artifact("run-1", "art-1", target)

    assert target.read_bytes() == ARTIFACT_BYTES
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert sorted(path.name for path in tmp_path.iterdir()) == ["succeeded.jsonl"]


def test_import_errors_csv_is_downloaded(
    service: ScriptedService, client: WePushClient, tmp_path: Path
) -> None:
    csv_body = b"lineNumber,code,reason,Mobile\n3,INVALID,not a number,'=1+1\n"

    async def errors(request: web.Request) -> web.StreamResponse:
        return web.Response(body=csv_body, content_type="text/csv")

    service.script("GET", ERRORS, errors)
    target = tmp_path / "rejected.csv"

    result = client.workspace(WS).audiences.download_errors("aud-1", "imp-1", target)

    assert target.read_bytes() == csv_body
    assert result.content_type is not None
    assert result.content_type.startswith("text/csv")
    (request,) = service.seen("GET", ERRORS)
    assert request.headers["Accept"] == "text/csv"
