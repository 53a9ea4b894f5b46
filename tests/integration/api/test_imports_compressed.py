"""Compressed uploads through the API: Content-Encoding gzip or deflate, limits on the decompressed file."""

from __future__ import annotations

import gzip
import zlib
from pathlib import Path
from typing import Any

import pytest

from tests.helpers_app import RunningApp
from tests.integration.api._support import default_workspace, service
from tests.integration.api._support_content import create_audience, expect, import_url, start_import, upload

CSV = (
    "mobile,name\r\n"
    "13800000001,Ann\r\n"
    '13800000002,"Bob\nSecond line"\r\n'
    "13800000003\r\n"  # a column missing
    ",Eve\r\n"  # no item id
    "13800000001,Ann again\r\n"  # duplicate
    "13800000004,张三\r\n"
).encode()
COUNTS = {"totalRows": 6, "acceptedRows": 3, "rejectedRows": 2, "duplicateRows": 1}


async def _started(app: RunningApp, ws: str) -> tuple[str, str]:
    audience = await create_audience(app, ws)
    started = await start_import(app, ws, audience["id"], itemIdField="mobile")
    return str(audience["id"]), str(started["id"])


async def _get(app: RunningApp, ws: str, audience_id: str, import_id: str, *rest: str) -> Any:
    return expect(
        await app.client.get(import_url(ws, audience_id, import_id, *rest), headers=app.admin()), 200
    )


@pytest.mark.parametrize(
    ("header", "body"),
    [
        ("gzip", gzip.compress(CSV)),
        ("x-gzip", gzip.compress(CSV[:40]) + gzip.compress(CSV[40:])),
        ("deflate", zlib.compress(CSV)),
        ("identity", CSV),
    ],
)
async def test_a_compressed_file_is_staged_as_the_file_itself(
    tmp_path: Path, header: str, body: bytes
) -> None:
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        audience_id, import_id = await _started(app, ws)
        headers = {**app.admin(), "Content-Encoding": header}
        staged = expect(await upload(app, ws, audience_id, import_id, body, headers=headers), 200)
        assert (staged["state"], staged["counts"]) == ("STAGED", COUNTS)
        preview = await _get(app, ws, audience_id, import_id, "preview")
        assert [row["fields"]["name"] for row in preview["accepted"]] == ["Ann", "Bob\nSecond line", "张三"]
        assert [(row["lineNumber"], row["code"]) for row in preview["rejected"]] == [
            (5, "COLUMN_COUNT"),
            (6, "MISSING_FIELD"),
            (7, "DUPLICATE_ITEM_KEY"),
        ]


async def test_an_unsupported_coding_is_415_and_the_import_still_waits_for_its_file(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        audience_id, import_id = await _started(app, ws)
        for header in ("br", "gzip, gzip"):
            refused = await upload(
                app,
                ws,
                audience_id,
                import_id,
                gzip.compress(CSV),
                headers={**app.admin(), "Content-Encoding": header},
            )
            problem = refused.json()
            assert refused.status_code == 415, refused.text
            assert refused.headers["content-type"].startswith("application/problem+json")
            assert problem["code"] == "VALIDATION_FAILED"
            assert problem["errors"][0]["field"] == "Content-Encoding"
            assert (await _get(app, ws, audience_id, import_id))["state"] == "CREATED"
        staged = expect(await upload(app, ws, audience_id, import_id, CSV), 200)
        assert staged["counts"] == COUNTS


@pytest.mark.parametrize(
    ("codings", "body"),
    [(("gzip", "br"), gzip.compress(CSV)), (("gzip", "gzip"), gzip.compress(gzip.compress(CSV)))],
    ids=["gzip-then-br", "gzip-twice"],
)
async def test_codings_on_separate_header_lines_count_as_one_list(
    tmp_path: Path, codings: tuple[str, ...], body: bytes
) -> None:
    """RFC 9110: several Content-Encoding lines mean what one comma-joined line does, so the second
    coding is refused (415) rather than ignored, and the import still waits for its file."""
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        audience_id, import_id = await _started(app, ws)
        lines = [*app.admin().items(), ("Content-Type", "text/csv")]
        refused = await app.client.put(
            import_url(ws, audience_id, import_id, "content"),
            headers=[*lines, *(("Content-Encoding", coding) for coding in codings)],
            content=body,
        )
        waiting = await _get(app, ws, audience_id, import_id)
        staged = expect(await upload(app, ws, audience_id, import_id, CSV), 200)

    assert refused.status_code == 415, refused.text
    assert refused.json()["errors"][0]["field"] == "Content-Encoding"
    assert waiting["state"] == "CREATED"
    assert staged["counts"] == COUNTS


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (CSV, "the body is not valid gzip content (incorrect header check)"),
        (
            gzip.compress(CSV + b"".join(b"1390000%04d,n\n" % i for i in range(2000)))[:-300],
            "the gzip content ends before its last block",
        ),
    ],
    ids=["not-compressed", "cut-short"],
)
async def test_content_that_is_not_what_its_coding_says_fails_the_import_with_the_reason(
    tmp_path: Path, body: bytes, reason: str
) -> None:
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        audience_id, import_id = await _started(app, ws)
        headers = {**app.admin(), "Content-Encoding": "gzip"}
        failed = expect(await upload(app, ws, audience_id, import_id, body, headers=headers), 200)
        assert failed["state"] == "FAILED"
        assert failed["failureReason"].startswith(reason)
        assert failed["counts"]["totalRows"] == 0
        refused = await app.client.get(import_url(ws, audience_id, import_id, "preview"), headers=app.admin())
        assert refused.status_code == 409


async def test_the_byte_limit_applies_to_the_decompressed_file(tmp_path: Path) -> None:
    # 30 MB of rows compress to well under the 1 MB limit: the upload stops once the file passes it.
    rows = b"mobile,name\n" + b"13800000000,n\n" * 2_000_000
    body = gzip.compress(rows, compresslevel=9)
    assert len(body) < 1_000_000
    async with service(tmp_path, WEPUSH_IMPORTS_MAX_BYTES="1000000") as app:
        ws = await default_workspace(app)
        audience_id, import_id = await _started(app, ws)
        headers = {**app.admin(), "Content-Encoding": "gzip"}
        refused = await upload(app, ws, audience_id, import_id, body, headers=headers)
        assert refused.status_code == 413, refused.text
        assert refused.json()["code"] == "PAYLOAD_TOO_LARGE"
        failed = await _get(app, ws, audience_id, import_id)
        assert failed["state"] == "FAILED"
        assert (
            failed["failureReason"]
            == "the file is larger than the import limit of 1000000 bytes once decompressed"
        )
