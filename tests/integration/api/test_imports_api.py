"""CSV/TXT imports through the API: streamed staging, exact counts, preview, error CSV, commit, recipients."""

from __future__ import annotations

import asyncio
import codecs
import csv
import gzip
import io
import logging
import zipfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.helpers_app import RunningApp
from tests.integration.api._support import default_workspace, issue_token, service
from tests.integration.api._support_content import (
    commit,
    create_audience,
    expect,
    import_url,
    start_import,
    upload,
    ws_url,
)
from tests.integration.api._support_runs import loopback_service
from wepush.server.api import audiences as audiences_api
from wepush.server.api._render_content import error_csv
from wepush.server.application import imports as imports_module
from wepush.server.application.import_retention import discard_staging_in_batches
from wepush.server.application.imports import ImportService
from wepush.server.domain import ImportState

LONG_NAME = "N" * 5000  # over the default 4096-character field limit

MIXED_CSV = (
    "mobile,name\r\n"
    "13800000001,Ann\r\n"  # line 2: accepted
    '13800000002,"Bob\nSecond line"\r\n'  # lines 3-4: accepted, quoted multi-line field
    "13800000003\r\n"  # line 5: a column missing
    "13800000004,Dan,extra\r\n"  # line 6: one column too many
    f"13800000005,{LONG_NAME}\r\n"  # line 7: field too long
    ",Eve\r\n"  # line 8: the item id is empty
    "13800000001,Ann again\r\n"  # line 9: duplicate of line 2
    "=1+2,Formula,cell\r\n"  # line 10: rejected; its raw line starts a spreadsheet formula
    "13800000007,Gus\r\n"  # line 11: accepted
).encode() + b"13800000008,\xff\xfe bad byte\r\n"  # line 12: not UTF-8


def bulk_csv(good: int, bad: int) -> bytes:
    rows = [f"1390000{i:04d},Bulk {i}" for i in range(good)] + [f"1391000{i:04d},x,y" for i in range(bad)]
    return MIXED_CSV + "".join(row + "\n" for row in rows).encode()


async def staged_import(
    app: RunningApp, ws: str, data: bytes, **settings: Any
) -> tuple[dict[str, Any], dict[str, Any]]:
    audience = await create_audience(app, ws)
    started = await start_import(app, ws, audience["id"], **({"itemIdField": "mobile"} | settings))
    assert started["state"] == "CREATED"
    staged = expect(await upload(app, ws, audience["id"], started["id"], data), 200)
    return audience, staged


async def first_recipients(app: RunningApp, ws: str, snapshot_id: str) -> dict[str, Any]:
    """The first page of a snapshot's recipients."""
    url = ws_url(ws, "audience-snapshots", snapshot_id, "recipients")
    return expect(await app.client.get(url, headers=app.admin()), 200)


async def test_mixed_file_is_staged_with_exact_counts_preview_and_error_download(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        audience, staged = await staged_import(app, ws, bulk_csv(good=25, bad=25))
        assert staged["state"] == "STAGED"
        assert staged["counts"] == {
            "totalRows": 60,
            "acceptedRows": 28,
            "rejectedRows": 31,
            "duplicateRows": 1,
        }

        preview = expect(
            await app.client.get(
                import_url(ws, audience["id"], staged["id"], "preview"), headers=app.admin()
            ),
            200,
        )
        assert preview["columns"] == ["mobile", "name"]
        assert len(preview["accepted"]) == 20
        assert len(preview["rejected"]) == 20
        assert preview["accepted"][1] == {
            "lineNumber": 3,
            "itemId": "13800000002",
            "fields": {"mobile": "13800000002", "name": "Bob\nSecond line"},
        }
        codes = {row["lineNumber"]: row["code"] for row in preview["rejected"]}
        assert {k: codes[k] for k in (5, 6, 7, 8, 9, 10, 12)} == {
            5: "COLUMN_COUNT",
            6: "COLUMN_COUNT",
            7: "FIELD_TOO_LONG",
            8: "MISSING_FIELD",
            9: "DUPLICATE_ITEM_KEY",
            10: "COLUMN_COUNT",
            12: "INVALID_ENCODING",
        }
        formula = next(row for row in preview["rejected"] if row["lineNumber"] == 10)
        assert formula["raw"] == "'=1+2,Formula,cell"

        download = await app.client.get(
            import_url(ws, audience["id"], staged["id"], "errors"), headers=app.admin()
        )
        assert download.status_code == 200
        assert download.headers["content-type"].startswith("text/csv")
        assert "attachment" in download.headers["content-disposition"]
        # A byte-order mark first, so that Excel reads the Chinese in raw lines as UTF-8.
        assert download.content.startswith(b'\xef\xbb\xbf"lineNumber"')
        table = list(csv.reader(io.StringIO(download.content.decode("utf-8-sig"))))
        assert table[0] == ["lineNumber", "code", "reason", "raw"]
        assert len(table) == 1 + 32
        by_line = {int(row[0]): row for row in table[1:]}
        assert by_line[10][3] == "'=1+2,Formula,cell"
        # Every cell is quoted, so a spreadsheet splitting on another delimiter cannot cut a raw line open.
        assert '\r\n"10","COLUMN_COUNT","' in download.text
        assert by_line[9][1] == "DUPLICATE_ITEM_KEY"
        assert by_line[12][3] == "13800000008,\ufffd\ufffd bad byte"
        assert by_line[7][3].startswith("13800000005,NNN")


async def test_an_error_rows_download_is_audited_like_an_artifact_download(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        audience = await create_audience(app, ws, "waiting")
        waiting = await start_import(app, ws, audience["id"], itemIdField="mobile")
        errors = import_url(ws, audience["id"], waiting["id"], "errors")
        early = await app.client.get(errors, headers=app.admin())
        assert early.status_code == 409  # nothing staged yet: nothing downloaded, nothing recorded
        _, staged = await staged_import(app, ws, MIXED_CSV)
        _, viewer = await issue_token(app, ws, "VIEWER")
        download = await app.client.get(
            import_url(ws, staged["audienceId"], staged["id"], "errors"),
            headers={**viewer, "X-Trace-Id": "trace-errors-1"},
        )
        assert download.status_code == 200

        audit = expect(
            await app.client.get(
                ws_url(ws, "audit-events"),
                headers=app.admin(),
                params={"action": "audience_import.errors.download"},
            ),
            200,
        )
        events = audit["items"]
        assert [(e["resourceType"], e["resourceId"], e["outcome"]) for e in events] == [
            ("AUDIENCE_IMPORT", staged["id"], "SUCCESS")
        ]
        assert events[0]["actor"]["id"] != "bootstrap-admin"
        assert events[0]["traceId"] == "trace-errors-1"
        assert events[0]["details"]["summary"].endswith("6 rejected, 1 duplicate")


async def test_commit_creates_an_immutable_snapshot_whose_recipients_page_in_sequence(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        audience, staged = await staged_import(app, ws, MIXED_CSV)
        headers = {**app.admin(), "Idempotency-Key": "commit-1"}
        url = import_url(ws, audience["id"], staged["id"], "commit")
        committed = await app.client.post(url, headers=headers, json={"version": audience["version"]})
        snapshot = expect(committed, 201)
        assert committed.headers["location"].endswith(f"/audience-snapshots/{snapshot['id']}")
        assert (snapshot["revision"], snapshot["recipientCount"], snapshot["fields"]) == (
            1,
            3,
            ["mobile", "name"],
        )
        assert snapshot["sourceImportId"] == staged["id"]
        replay = await app.client.post(url, headers=headers, json={"version": audience["version"]})
        assert replay.json() == snapshot
        again = await app.client.post(url, headers=app.admin(), json={"version": audience["version"] + 1})
        assert (again.status_code, again.json()["code"]) == (409, "IMPORT_STATE_CONFLICT")

        after = expect(
            await app.client.get(ws_url(ws, "audiences", audience["id"]), headers=app.admin()), 200
        )
        assert (after["latestSnapshotId"], after["latestRevision"], after["recipientCount"]) == (
            snapshot["id"],
            1,
            3,
        )
        imported = expect(
            await app.client.get(import_url(ws, audience["id"], staged["id"]), headers=app.admin()), 200
        )
        assert (imported["state"], imported["snapshotId"]) == ("COMMITTED", snapshot["id"])

        recipients = [r async for r in _all_recipients(app, ws, snapshot["id"], limit=2)]
        assert [(r["sequence"], r["itemId"]) for r in recipients] == [
            (1, "13800000001"),
            (2, "13800000002"),
            (3, "13800000007"),
        ]
        assert recipients[1]["fields"] == {"mobile": "13800000002", "name": "Bob\nSecond line"}


async def _all_recipients(
    app: RunningApp, ws: str, snapshot_id: str, *, limit: int
) -> AsyncIterator[dict[str, Any]]:
    url = ws_url(ws, "audience-snapshots", snapshot_id, "recipients")
    params: dict[str, Any] = {"limit": limit}
    while True:
        page = expect(await app.client.get(url, headers=app.admin(), params=params), 200)
        assert len(page["items"]) <= limit
        for item in page["items"]:
            yield item
        if not page["page"]["hasMore"]:
            return
        params = {"limit": limit, "cursor": page["page"]["nextCursor"]}


async def test_a_second_commit_rechecks_the_audience_version_and_snapshots_list_newest_first(
    tmp_path: Path,
) -> None:
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        audience, first = await staged_import(app, ws, b"mobile,name\n1,a\n")
        expect(await commit(app, ws, audience["id"], first["id"], audience["version"]), 201)
        second = await start_import(app, ws, audience["id"], itemIdField="mobile")
        expect(await upload(app, ws, audience["id"], second["id"], b"mobile,name\n1,a\n2,b\n"), 200)
        stale = await commit(app, ws, audience["id"], second["id"], audience["version"])
        assert (stale.status_code, stale.json()["code"]) == (409, "VERSION_CONFLICT")
        assert stale.json()["detail"].endswith(
            f"is at version {audience['version'] + 1}, not {audience['version']}"
        )
        current = expect(
            await app.client.get(ws_url(ws, "audiences", audience["id"]), headers=app.admin()), 200
        )
        newer = expect(await commit(app, ws, audience["id"], second["id"], current["version"]), 201)
        assert (newer["revision"], newer["recipientCount"]) == (2, 2)

        url = ws_url(ws, "audiences", audience["id"], "snapshots")
        page = expect(await app.client.get(url, headers=app.admin(), params={"limit": 1}), 200)
        assert [s["revision"] for s in page["items"]] == [2]
        rest = expect(
            await app.client.get(
                url, headers=app.admin(), params={"limit": 1, "cursor": page["page"]["nextCursor"]}
            ),
            200,
        )
        assert ([s["revision"] for s in rest["items"]], rest["page"]["hasMore"]) == ([1], False)
        got = expect(
            await app.client.get(ws_url(ws, "audience-snapshots", newer["id"]), headers=app.admin()), 200
        )
        assert got == newer


@pytest.mark.parametrize(
    "identity",
    [{"dedupeKeys": ["mobile"]}, {"itemIdField": "mobile"}, {}],
    ids=["dedupe-keys", "item-id-field", "by-default"],
)
async def test_txt_import_reads_one_value_per_line_and_dedupes_on_it(
    tmp_path: Path, identity: dict[str, Any]
) -> None:
    # A TXT file is a list of recipients: its one value is who they are, whether or not the import says so,
    # so the same number twice is sent to once.
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        audience = await create_audience(app, ws)
        started = await start_import(
            app, ws, audience["id"], format="TXT", hasHeader=False, fieldMapping={"1": "mobile"}, **identity
        )
        body = b"13800000001\n\n 13800000002 \n13800000001\n"
        staged = expect(
            await upload(app, ws, audience["id"], started["id"], body, media_type="text/plain"), 200
        )
        assert staged["counts"] == {"totalRows": 3, "acceptedRows": 2, "rejectedRows": 0, "duplicateRows": 1}
        snapshot = expect(await commit(app, ws, audience["id"], started["id"], audience["version"]), 201)
        page = await first_recipients(app, ws, snapshot["id"])
        assert [(r["itemId"], r["fields"]) for r in page["items"]] == [
            ("13800000001", {"mobile": "13800000001"}),
            ("13800000002", {"mobile": "13800000002"}),
        ]


@pytest.mark.parametrize("plain", [True, False], ids=["plain-lines", "quoted-lines"])
async def test_csv_values_are_trimmed_so_a_stray_space_is_not_another_recipient(
    tmp_path: Path, plain: bool
) -> None:
    # Spreadsheets and hand-edited files leave spaces, tabs and full-width spaces around values. A quote in
    # a file sends its lines through the CSV parser instead of the plain fast path: both trim alike.
    quoted = "" if plain else '"13800000009","Quoted "\n'
    body = (
        "mobile , name\n"
        "13800000001,Ann\n"
        " 13800000001 ,Ann again\n"  # the same recipient: a duplicate, not a second one
        "13800000002\t,\u3000Bob Lee \n"
        "   ,Nobody\n"  # only spaces: the item id is empty
        f"{quoted}"
    ).encode()
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        audience = await create_audience(app, ws)
        started = await start_import(
            app, ws, audience["id"], itemIdField="mobile", fieldMapping={"mobile": "mobile", "name": "name"}
        )
        staged = expect(await upload(app, ws, audience["id"], started["id"], body), 200)
        snapshot = expect(await commit(app, ws, audience["id"], started["id"], audience["version"]), 201)
        page = await first_recipients(app, ws, snapshot["id"])

        kept = await create_audience(app, ws, "exact")
        exact = await start_import(
            app, ws, kept["id"], itemIdField="mobile", trimWhitespace=False, fieldMapping={"mobile": "mobile"}
        )
        untrimmed = expect(await upload(app, ws, kept["id"], exact["id"], b"mobile\n1\n 1\n"), 200)

    assert started["trimWhitespace"] is True
    assert staged["counts"] == {
        "totalRows": 4 if plain else 5,
        "acceptedRows": 2 if plain else 3,
        "rejectedRows": 1,
        "duplicateRows": 1,
    }
    expected = [("13800000001", {"mobile": "13800000001", "name": "Ann"})]
    expected += [("13800000002", {"mobile": "13800000002", "name": "Bob Lee"})]
    if not plain:
        expected += [("13800000009", {"mobile": "13800000009", "name": "Quoted"})]
    assert [(r["itemId"], r["fields"]) for r in page["items"]] == expected
    # Kept exactly as in the file when asked: " 1" is then another recipient.
    assert exact["trimWhitespace"] is False
    assert untrimmed["counts"]["acceptedRows"] == 2


async def test_a_txt_import_reads_its_first_line_as_a_value_unless_told_it_is_a_header(
    tmp_path: Path,
) -> None:
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        audience = await create_audience(app, ws)
        listed = await start_import(app, ws, audience["id"], format="TXT", fieldMapping={"1": "mobile"})
        assert listed["hasHeader"] is False
        staged = expect(
            await upload(
                app, ws, audience["id"], listed["id"], b"13800000001\n13800000002\n", media_type="text/plain"
            ),
            200,
        )
        assert staged["counts"]["acceptedRows"] == 2
        headed = await start_import(
            app, ws, audience["id"], format="TXT", hasHeader=True, fieldMapping={"phone": "mobile"}
        )
        staged = expect(
            await upload(
                app, ws, audience["id"], headed["id"], b"phone\n13800000001\n", media_type="text/plain"
            ),
            200,
        )
        assert (headed["hasHeader"], staged["counts"]["acceptedRows"]) == (True, 1)
        # CSV keeps naming its columns on the first line.
        assert (await start_import(app, ws, audience["id"]))["hasHeader"] is True


async def test_a_gb18030_file_from_a_chinese_spreadsheet_is_stored_as_unicode(tmp_path: Path) -> None:
    data = (
        '手机,姓名\r\n13800000001,张三\r\n13800000002,"李四，经理"\r\n13800000001,张三（重复）\r\n'
    ).encode("gb18030") + b"13800000003,\x81\x20\r\n"
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        audience, staged = await staged_import(
            app, ws, data, encoding="gb18030", fieldMapping={"手机": "mobile", "姓名": "name"}
        )
        assert staged["encoding"] == "gb18030"
        assert staged["counts"] == {"totalRows": 4, "acceptedRows": 2, "rejectedRows": 1, "duplicateRows": 1}
        errors = await app.client.get(
            import_url(ws, audience["id"], staged["id"], "errors"), headers=app.admin()
        )
        codes = [row[1] for row in csv.reader(io.StringIO(errors.content.decode("utf-8-sig")))][1:]
        assert codes == ["DUPLICATE_ITEM_KEY", "INVALID_ENCODING"]
        snapshot = expect(await commit(app, ws, audience["id"], staged["id"], audience["version"]), 201)
        page = await first_recipients(app, ws, snapshot["id"])
        assert [r["fields"] for r in page["items"]] == [
            {"mobile": "13800000001", "name": "张三"},
            {"mobile": "13800000002", "name": "李四，经理"},
        ]


async def test_excel_unicode_text_imports_as_utf16_and_fails_clearly_under_another_encoding(
    tmp_path: Path,
) -> None:
    # Excel's "Unicode Text": UTF-16 little-endian with a byte-order mark, tab-separated, CRLF.
    text = "手机\t姓名\r\n13800000001\t张三\r\n13800000002\t李四\r\n13800000001\t张三（重复）\r\n"
    data = codecs.BOM_UTF16_LE + text.encode("utf-16-le")
    mapping = {"手机": "mobile", "姓名": "name"}
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        audience, staged = await staged_import(
            app, ws, data, encoding="utf-16", delimiter="\t", fieldMapping=mapping
        )
        assert (staged["state"], staged["encoding"]) == ("STAGED", "utf-16")
        assert staged["counts"] == {"totalRows": 3, "acceptedRows": 2, "rejectedRows": 0, "duplicateRows": 1}
        snapshot = expect(await commit(app, ws, audience["id"], staged["id"], audience["version"]), 201)
        page = await first_recipients(app, ws, snapshot["id"])
        assert [r["fields"] for r in page["items"]] == [
            {"mobile": "13800000001", "name": "张三"},
            {"mobile": "13800000002", "name": "李四"},
        ]

        # The same file sent to an import that expects UTF-8 fails with the setting to choose.
        async def staged_as_utf8(content: bytes) -> dict[str, Any]:
            started = await start_import(app, ws, audience["id"], delimiter="\t", fieldMapping=mapping)
            return expect(await upload(app, ws, audience["id"], started["id"], content), 200)

        failed = await staged_as_utf8(data)
        assert failed["state"] == "FAILED"
        assert "the file is UTF-16" in failed["failureReason"]
        assert "encoding utf-16" in failed["failureReason"]
        # Without its byte-order mark, the NULs in the header point the same way.
        unmarked = await staged_as_utf8(text.encode("utf-16-le"))
        assert unmarked["state"] == "FAILED"
        assert "usually means the file is UTF-16: choose encoding utf-16" in unmarked["failureReason"]


async def test_an_unmarked_utf16_number_list_fails_naming_utf16_and_imports_under_it(tmp_path: Path) -> None:
    # No header and no byte-order mark: the NULs between the first digits are all that tells.
    numbers = "13800000001\r\n13800000002\r\n".encode("utf-16-le")
    txt = {"format": "TXT", "hasHeader": False, "fieldMapping": {"1": "mobile"}}
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        audience = await create_audience(app, ws)

        async def uploaded(**settings: Any) -> dict[str, Any]:
            started = await start_import(app, ws, audience["id"], **txt, **settings)
            sent = await upload(app, ws, audience["id"], started["id"], numbers, media_type="text/plain")
            return expect(sent, 200)

        failed = await uploaded()
        assert failed["state"] == "FAILED"
        assert failed["failureReason"] == (
            "the file looks like UTF-16 without a byte-order mark (NUL bytes between its first "
            "characters), not utf-8: start a new import with encoding utf-16"
        )
        staged = await uploaded(encoding="utf-16")
        assert staged["state"] == "STAGED"
        assert staged["counts"] == {"totalRows": 2, "acceptedRows": 2, "rejectedRows": 0, "duplicateRows": 0}


async def test_a_utf8_number_list_in_a_utf16_import_fails_naming_utf8(tmp_path: Path) -> None:
    """Read as UTF-16, these bytes would be one recipient '㌱〸〰…': no row would show the mistake."""
    numbers = "13800000001\n13800000002\n"
    txt = {"format": "TXT", "fieldMapping": {"1": "mobile"}, "encoding": "utf-16"}
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        audience = await create_audience(app, ws)

        async def uploaded(content: bytes) -> dict[str, Any]:
            started = await start_import(app, ws, audience["id"], **txt)
            return expect(await upload(app, ws, audience["id"], started["id"], content), 200)

        failed = await uploaded(numbers.encode())
        staged = await uploaded(numbers.encode("utf-16-le"))

    assert (failed["state"], failed["counts"]["totalRows"]) == ("FAILED", 0)
    assert failed["failureReason"] == (
        "the file is not UTF-16 (its start has no NUL byte, which every UTF-16 line break, digit, comma "
        "and Latin letter has): start a new import with encoding utf-8"
    )
    assert (staged["state"], staged["counts"]["acceptedRows"]) == ("STAGED", 2)


async def test_a_quote_never_closed_fails_the_import_naming_its_line(tmp_path: Path) -> None:
    rows = "".join(f"138000000{i:02d},user{i}\n" for i in range(20)).replace("user10", '"user10')
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        _, failed = await staged_import(app, ws, b"mobile,name\n" + rows.encode())
        assert (failed["state"], failed["counts"]["acceptedRows"]) == ("FAILED", 0)
        assert failed["failureReason"].startswith(
            "line 12 opens a quoted field that is never closed, so the 9 lines after it"
        )


async def test_a_file_in_the_wrong_form_gets_a_reason_that_names_the_right_one(tmp_path: Path) -> None:
    csv_text = "mobile,name\n13800000001,张三\n13800000002,李四\n"
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        audience = await create_audience(app, ws)

        async def uploaded(content: bytes, **settings: Any) -> dict[str, Any]:
            started = await start_import(app, ws, audience["id"], itemIdField="mobile", **settings)
            return expect(await upload(app, ws, audience["id"], started["id"], content), 200)

        # Compressed, but sent without Content-Encoding.
        zipped = await uploaded(gzip.compress(csv_text.encode()))
        assert zipped["state"] == "FAILED"
        assert zipped["failureReason"].startswith(
            "the file is gzip-compressed: send it with the header Content-Encoding: gzip"
        )
        # A spreadsheet sent as it is: it was read as text and refused as a UTF-16 header.
        workbook = io.BytesIO()
        with zipfile.ZipFile(workbook, "w") as archive:
            archive.writestr("xl/workbook.xml", "<workbook/>")
        as_xlsx = await uploaded(workbook.getvalue())
        assert as_xlsx["state"] == "FAILED"
        assert as_xlsx["failureReason"] == (
            "the file is not CSV or text but a ZIP archive, as an Excel workbook (.xlsx) is: open it in the "
            "spreadsheet program, save the sheet as CSV UTF-8, and import that file"
        )
        as_png = await uploaded(b"\x89PNG\r\n\x1a\n" + bytes(range(256)))
        assert as_png["failureReason"] == (
            "the file is not CSV or text but a PNG image: start a new import with a CSV or text file"
        )
        # UTF-8 read as UTF-16: no NUL byte, which every UTF-16 line break has.
        as_utf16 = await uploaded(csv_text.encode() + b"x", encoding="utf-16")
        assert as_utf16["state"] == "FAILED"
        assert as_utf16["failureReason"].startswith("the file is not UTF-16")
        assert as_utf16["failureReason"].endswith("start a new import with encoding utf-8")
        # GBK (a Chinese spreadsheet's CSV) read as UTF-8: the rows with Chinese names are rejected.
        as_utf8 = await uploaded(csv_text.encode("gbk"))
        assert as_utf8["counts"]["rejectedRows"] == 2
        errors = await app.client.get(
            import_url(ws, audience["id"], as_utf8["id"], "errors"), headers=app.admin()
        )
        reasons = {row[2] for row in csv.reader(io.StringIO(errors.text.lstrip("\ufeff")))}
        assert (
            "the line is not valid utf-8; spreadsheet programs on Chinese systems usually save gb18030"
            in reasons
        )


async def test_utf8_read_as_gb18030_fails_instead_of_storing_garbled_names(tmp_path: Path) -> None:
    # Before, 张三 was stored (and would have been sent) as 寮犱笁: every row looked accepted.
    csv_text = "mobile,name\n13800000001,张三\n13800000002,李四\n"
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        audience = await create_audience(app, ws)

        async def uploaded(content: bytes) -> dict[str, Any]:
            started = await start_import(app, ws, audience["id"], itemIdField="mobile", encoding="gb18030")
            return expect(await upload(app, ws, audience["id"], started["id"], content), 200)

        plain = await uploaded(csv_text.encode())
        marked = await uploaded(csv_text.encode("utf-8-sig"))
        gbk = await uploaded(csv_text.encode("gbk"))

        assert (plain["state"], marked["state"]) == ("FAILED", "FAILED")
        assert plain["failureReason"].startswith("the file reads as UTF-8")
        assert marked["failureReason"].startswith("the file is UTF-8 (it starts with a UTF-8 byte-order mark")
        assert plain["failureReason"].endswith("start a new import with encoding utf-8")
        assert (gbk["state"], gbk["counts"]["acceptedRows"]) == ("STAGED", 2)
        preview = expect(
            await app.client.get(import_url(ws, audience["id"], gbk["id"], "preview"), headers=app.admin()),
            200,
        )
        assert [row["fields"]["name"] for row in preview["accepted"]] == ["张三", "李四"]

        # Past the 64 KiB held back, the first Chinese names fail the import there, and the rows staged
        # before them count for nothing: no half-garbled audience can be committed.
        ascii_rows = "".join(f"1370000{n:04d},Ann\n" for n in range(6000))
        late = await uploaded(f"mobile,name\n{ascii_rows}13900000001,王五\n13900000002,赵六\n".encode())
        assert (late["state"], late["counts"]["acceptedRows"]) == ("FAILED", 0)
        assert late["failureReason"] == plain["failureReason"]


async def test_a_charset_the_import_does_not_read_is_refused_before_anything_is_read(tmp_path: Path) -> None:
    csv_text = "mobile,name\n13800000001,张三\n"
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        audience = await create_audience(app, ws)
        gb = await start_import(app, ws, audience["id"], itemIdField="mobile", encoding="gb18030")

        refused = await upload(
            app, ws, audience["id"], gb["id"], csv_text.encode(), media_type="text/csv; charset=UTF-8"
        )

        assert refused.status_code == 415
        problem = refused.json()
        assert [(e["field"], e["code"]) for e in problem["errors"]] == [("Content-Type", "CHARSET_MISMATCH")]
        assert (
            "declares charset=utf-8, but this import reads gb18030: start a new import with encoding utf-8"
            in (problem["detail"])
        )
        # Nothing was read: the import still takes its file, here with a charset that agrees.
        agreed = await upload(
            app, ws, audience["id"], gb["id"], csv_text.encode("gbk"), media_type='text/csv; charset="GBK"'
        )
        assert (expect(agreed, 200)["state"], agreed.json()["counts"]["acceptedRows"]) == ("STAGED", 1)

        for charset, says in (
            ("iso-8859-1", "imports read utf-8, gb18030 (GBK, GB2312) and utf-16 files"),
            ("x-no-such", "which is no text encoding the Service knows"),
        ):
            started = await start_import(app, ws, audience["id"], itemIdField="mobile")
            other = await upload(
                app,
                ws,
                audience["id"],
                started["id"],
                b"mobile\n1\n",
                media_type=f"text/csv; charset={charset}",
            )
            assert other.status_code == 415
            assert says in other.json()["detail"]
        plain = await start_import(app, ws, audience["id"], itemIdField="mobile")
        utf8 = await upload(
            app, ws, audience["id"], plain["id"], csv_text.encode(), media_type="text/csv;charset=utf-8"
        )
        assert expect(utf8, 200)["state"] == "STAGED"


OLD_MAC_FILES: list[tuple[bytes, dict[str, Any]]] = [
    (b"mobile,name\r13800000001,Ann\r13800000002,Bob\r", {}),
    (b"1,a\r2,b\r3,c\r", {"hasHeader": False, "itemIdField": "id", "fieldMapping": {"1": "id", "2": "name"}}),
    (b"13800000001\r13800000002\r13800000003\r", {"format": "TXT", "fieldMapping": {"1": "mobile"}}),
    (
        b"mobile\r13800000001\r13800000002\r",
        {"format": "TXT", "hasHeader": True, "fieldMapping": {"mobile": "mobile"}},
    ),
]


@pytest.mark.parametrize(
    ("content", "settings"), OLD_MAC_FILES, ids=["csv-header", "csv", "txt", "txt-header"]
)
async def test_a_file_with_old_mac_line_ends_fails_saying_how_to_save_it(
    tmp_path: Path, content: bytes, settings: dict[str, Any]
) -> None:
    """Whatever its format and header: read on, such a file would be one row holding every line."""
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        _, failed = await staged_import(app, ws, content, **settings)
        assert failed["state"] == "FAILED"
        assert failed["failureReason"] == (
            "the whole file reads as one line; its lines seem to end in a carriage return alone (old Mac "
            "line ends): save it with CRLF or LF line ends"
        )
        assert failed["counts"]["totalRows"] == 0


async def test_a_spreadsheet_csv_with_a_byte_order_mark_imports_under_the_default_encoding(
    tmp_path: Path,
) -> None:
    # "CSV UTF-8" as spreadsheet programs save it: a byte-order mark before the header.
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        audience = await create_audience(app, ws)
        started = await start_import(app, ws, audience["id"], fieldMapping={"mobile": "mobile"})
        content = "\ufeffmobile,name\r\n13800000001,张三\r\n".encode()
        staged = expect(await upload(app, ws, audience["id"], started["id"], content), 200)
        assert staged["state"] == "STAGED"
        assert staged["counts"]["acceptedRows"] == 1


@pytest.mark.parametrize("content", [b"mobile,name\n", b"mobile,name\n,a\n1,b,c\n"])
async def test_an_import_without_accepted_rows_cannot_replace_the_audience(
    tmp_path: Path, content: bytes
) -> None:
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        audience = await create_audience(app, ws)
        started = await start_import(app, ws, audience["id"], itemIdField="mobile")
        staged = expect(await upload(app, ws, audience["id"], started["id"], content), 200)
        assert (staged["state"], staged["counts"]["acceptedRows"]) == ("STAGED", 0)
        refused = await commit(app, ws, audience["id"], started["id"], audience["version"])
        problem = refused.json()
        assert (refused.status_code, problem["code"]) == (409, "IMPORT_STATE_CONFLICT")
        assert "no accepted rows" in problem["detail"]
        unchanged = expect(
            await app.client.get(ws_url(ws, "audiences", audience["id"]), headers=app.admin()), 200
        )
        assert (unchanged["version"], unchanged["latestSnapshotId"]) == (audience["version"], None)


async def test_a_file_that_does_not_fit_the_mapping_fails_the_import(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        audience = await create_audience(app, ws)
        started = await start_import(app, ws, audience["id"], fieldMapping={"Phone": "mobile"})
        failed = expect(await upload(app, ws, audience["id"], started["id"], b"mobile,name\n1,a\n"), 200)
        assert failed["state"] == "FAILED"
        assert "Phone" in failed["failureReason"]
        refused = await commit(app, ws, audience["id"], started["id"], audience["version"])
        assert (refused.status_code, refused.json()["code"]) == (409, "IMPORT_STATE_CONFLICT")
        preview = await app.client.get(
            import_url(ws, audience["id"], started["id"], "preview"), headers=app.admin()
        )
        assert preview.status_code == 409


async def test_content_is_accepted_once_and_preview_needs_staged_rows(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        audience = await create_audience(app, ws)
        started = await start_import(app, ws, audience["id"])
        early = await app.client.get(
            import_url(ws, audience["id"], started["id"], "preview"), headers=app.admin()
        )
        assert (early.status_code, early.json()["code"]) == (409, "IMPORT_STATE_CONFLICT")
        expect(await upload(app, ws, audience["id"], started["id"], b"mobile,name\n1,a\n"), 200)
        twice = await upload(app, ws, audience["id"], started["id"], b"mobile,name\n2,b\n")
        assert (twice.status_code, twice.json()["code"]) == (409, "IMPORT_STATE_CONFLICT")
        other = await create_audience(app, ws, "other")
        elsewhere = await app.client.get(import_url(ws, other["id"], started["id"]), headers=app.admin())
        assert elsewhere.status_code == 404


async def test_import_settings_are_validated_before_any_content(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        audience = await create_audience(app, ws)
        response = await app.client.post(
            import_url(ws, audience["id"]),
            headers=app.admin(),
            json={"format": "CSV", "fieldMapping": {"Mobile": "mobile"}, "itemIdField": "email"},
        )
        assert (response.status_code, response.json()["code"]) == (400, "VALIDATION_FAILED")
        assert [e["field"] for e in response.json()["errors"]] == ["/itemIdField"]
        # A field no template could name ({{first name}}) is refused where it is mapped.
        response = await app.client.post(
            import_url(ws, audience["id"]),
            headers=app.admin(),
            json={"format": "CSV", "fieldMapping": {"First Name": "first name"}},
        )
        assert (response.status_code, response.json()["code"]) == (400, "VALIDATION_FAILED")
        assert "fieldMapping" in response.json()["errors"][0]["field"]


async def test_an_upload_logs_no_warnings(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        caplog.set_level(logging.INFO)
        caplog.clear()  # the start-up's own warning (where the bootstrap token went) is not the upload's
        await staged_import(app, ws, bulk_csv(good=5, bad=1))
    warnings = [f"{r.name}: {r.getMessage()}" for r in caplog.records if r.levelno >= logging.WARNING]
    assert warnings == []


async def test_an_import_that_cannot_record_its_staged_rows_fails_instead_of_staying_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def broken(*args: object, **kwargs: object) -> None:
        raise OSError("the database went away while the import was being marked STAGED")

    monkeypatch.setattr(ImportService, "_mark_staged", broken)
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        audience = await create_audience(app, ws)
        started = await start_import(app, ws, audience["id"], itemIdField="mobile")
        response = await upload(app, ws, audience["id"], started["id"], b"mobile,name\n1,a\n")
        found = expect(
            await app.client.get(import_url(ws, audience["id"], started["id"]), headers=app.admin()), 200
        )

    assert response.status_code == 500
    assert found["state"] == "FAILED"
    assert found["failureReason"] == "the upload did not complete"


async def test_an_error_download_whose_rows_are_discarded_midway_breaks_off_instead_of_ending_short(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # Pages of 5 rows; after the first page the retention sweep deletes the staged rows, as it does once
    # the deadline passes while a slow client is still reading.
    monkeypatch.setattr(imports_module, "ERROR_PAGE_ROWS", 5)
    complete = error_csv
    async with loopback_service(tmp_path) as app:
        deps = app.runtime.deps
        assert deps is not None
        ws = await default_workspace(app)
        audience, staged = await staged_import(app, ws, bulk_csv(good=5, bad=20))
        delivered: list[bytes] = []

        async def swept_midway(pages: AsyncIterator[list[Any]]) -> AsyncIterator[bytes]:
            async for chunk in complete(pages):
                delivered.append(chunk)
                if len(delivered) == 2:  # the header, then the first page
                    await discard_staging_in_batches(deps.uow, staged["id"])
                yield chunk

        monkeypatch.setattr(audiences_api, "error_csv", swept_midway)
        # Under way, the response can only be broken off: the server closes the connection before the
        # last chunk, so the client cannot take the first page for the whole file.
        with pytest.raises(httpx.RemoteProtocolError, match="incomplete"):
            await app.client.get(import_url(ws, audience["id"], staged["id"], "errors"), headers=app.admin())
        warnings = [
            r.getMessage() for r in caplog.records if getattr(r, "event", "") == "IMPORT_ERRORS_INCOMPLETE"
        ]
        assert len(warnings) == 1
        assert "5 of 27 delivered" in warnings[0]

        # Without the sweep the same download is whole.
        monkeypatch.setattr(audiences_api, "error_csv", complete)
        again = await start_import(app, ws, audience["id"], itemIdField="mobile")
        expect(await upload(app, ws, audience["id"], again["id"], bulk_csv(good=5, bad=20)), 200)
        whole = expect_ok_csv(
            await app.client.get(import_url(ws, audience["id"], again["id"], "errors"), headers=app.admin())
        )
    assert len(delivered) == 2
    assert len(whole) == 1 + 27


def expect_ok_csv(response: Any) -> list[list[str]]:
    assert response.status_code == 200, response.text
    return list(csv.reader(io.StringIO(response.content.decode("utf-8-sig"))))


async def test_many_commits_at_once_each_get_their_snapshot_without_exhausting_the_pool(
    tmp_path: Path,
) -> None:
    # Each commit reads the checksum on a second connection. Eight at once on SQLite's pool of five used
    # to hold one connection each while waiting for a second: all failed with 500 once the pool timed out.
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        staged = []
        for n in range(8):
            audience = await create_audience(app, ws, f"branch-{n}")
            started = await start_import(app, ws, audience["id"], itemIdField="mobile")
            rows = "".join(f"1380000{n}{i:03d},Name {i}\n" for i in range(10)).encode()
            expect(await upload(app, ws, audience["id"], started["id"], b"mobile,name\n" + rows), 200)
            staged.append((audience, started))

        async def unrelated_read() -> httpx.Response:
            return await app.client.get(ws_url(ws, "audiences"), headers=app.admin())

        # An unrelated read while the commits run is served too.
        listed, *committed = await asyncio.gather(
            unrelated_read(),
            *(
                commit(app, ws, audience["id"], started["id"], audience["version"])
                for audience, started in staged
            ),
        )

    assert [response.status_code for response in committed] == [201] * 8, [r.text for r in committed]
    assert {response.json()["recipientCount"] for response in committed} == {10}
    assert listed.status_code == 200
    assert len(listed.json()["items"]) == 8


async def test_a_duplicate_shows_the_same_fields_in_preview_and_download(tmp_path: Path) -> None:
    # Only the mapped column is imported; the duplicate's line was not kept when it was accepted.
    data = b"name,mobile,city\nAnn,13800000001,X\nBob,13800000001,Y\n"
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        audience, staged = await staged_import(app, ws, data, fieldMapping={"mobile": "mobile"})
        preview = expect(
            await app.client.get(
                import_url(ws, audience["id"], staged["id"], "preview"), headers=app.admin()
            ),
            200,
        )
        download = await app.client.get(
            import_url(ws, audience["id"], staged["id"], "errors"), headers=app.admin()
        )

    assert preview["rejected"] == [
        {
            "lineNumber": 3,
            "code": "DUPLICATE_ITEM_KEY",
            "reason": "the item key already appeared on an earlier line",
            "raw": "13800000001",
        }
    ]
    assert list(csv.reader(io.StringIO(download.content.decode("utf-8-sig"))))[1] == [
        "3",
        "DUPLICATE_ITEM_KEY",
        "the item key already appeared on an earlier line",
        "13800000001",
    ]


async def test_an_upload_whose_audience_is_deleted_meanwhile_fails_instead_of_reporting_staged_rows(
    tmp_path: Path,
) -> None:
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        audience = await create_audience(app, ws)
        started = await start_import(app, ws, audience["id"], itemIdField="mobile")

        async def body() -> AsyncIterator[bytes]:
            yield b"mobile,name\n13800000001,Ann\n"
            deleted = await app.client.delete(ws_url(ws, "audiences", audience["id"]), headers=app.admin())
            assert deleted.status_code == 204, deleted.text
            yield b"13800000002,Bob\n"

        response = await upload(app, ws, audience["id"], started["id"], body())
        assert app.runtime.deps is not None
        async with app.runtime.deps.uow(read_only=True) as uow:
            left = await uow.audience_imports.count_staged(started["id"])

    assert response.status_code == 404, response.text
    assert response.json()["code"] == "RESOURCE_NOT_FOUND"
    # The staged rows went with the failure instead of waiting a day for the retention sweep.
    assert left.total_rows == 0


async def test_an_upload_that_read_the_import_before_another_claimed_it_gets_a_state_conflict(
    tmp_path: Path, database_backend: str, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Two uploads to one import at once, on PostgreSQL: both read it CREATED, one claims it, the other's
    # conditional update finds a newer version. The loser is told what the winner did to the import,
    # never a VERSION_CONFLICT that no retry of an upload could fix.
    async with service(
        tmp_path, WEPUSH_DATABASE_TYPE=database_backend, WEPUSH_DATABASE_URL=database_url
    ) as app:
        ws = await default_workspace(app)
        audience = await create_audience(app, ws, "raced-upload")
        started = await start_import(app, ws, audience["id"])
        url = import_url(ws, audience["id"], started["id"])
        read = ImportService._import_of
        first_read: list[Any] = []
        loser_reads: list[Any] = []
        winner_done = False

        async def before_the_winner(self: ImportService, *args: Any) -> Any:
            found = await read(self, *args)
            if not first_read:
                first_read.append(found)  # the winner's claim reads the import CREATED
            elif loser_reads == [] and winner_done:
                loser_reads.append(found)
                return first_read[0]  # the loser read it at the same moment
            return found

        monkeypatch.setattr(ImportService, "_import_of", before_the_winner)
        winner = await upload(app, ws, audience["id"], started["id"], b"mobile,name\n1380001,Ann\n")
        winner_done = True
        loser = await upload(app, ws, audience["id"], started["id"], b"mobile,name\n1380002,Bob\n")
        stored = expect(await app.client.get(url, headers=app.admin()), 200)

    assert expect(winner, 200)["state"] == "STAGED"
    assert first_read[0].state is ImportState.CREATED
    assert len(loser_reads) == 1
    problem = loser.json()
    assert (loser.status_code, problem["code"]) == (409, "IMPORT_STATE_CONFLICT"), problem
    assert "STAGED" in problem["detail"]
    assert (stored["state"], stored["counts"]["acceptedRows"]) == ("STAGED", 1)


@pytest.mark.parametrize("media_type", ["application/vnd.ms-excel", "application/octet-stream"])
async def test_a_browser_or_a_generic_tool_may_name_the_file_otherwise(
    tmp_path: Path, media_type: str
) -> None:
    """The import's format decides how the file is read; the body is still streamed, not parsed as a
    request body first (it would then arrive empty)."""
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        audience = await create_audience(app, ws)
        started = await start_import(app, ws, audience["id"], itemIdField="mobile")
        staged = expect(
            await upload(
                app, ws, audience["id"], started["id"], b"mobile,name\n1,Ann\n2,Bo\n", media_type=media_type
            ),
            200,
        )
        assert (staged["state"], staged["counts"]["acceptedRows"]) == ("STAGED", 2)

        other = await start_import(app, ws, audience["id"], itemIdField="mobile")
        refused = await upload(
            app, ws, audience["id"], other["id"], b"mobile\n1\n", media_type="application/json"
        )
        assert (refused.status_code, refused.json()["code"]) == (415, "VALIDATION_FAILED")
        assert "text/csv" in refused.json()["detail"]
