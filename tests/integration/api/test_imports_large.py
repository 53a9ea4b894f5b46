"""A 100,000-row CSV through the API, streamed in chunks, with bad and duplicate rows mixed in."""

from __future__ import annotations

import csv
import io
from collections.abc import AsyncIterator
from pathlib import Path

from tests.integration.api._support import default_workspace, service
from tests.integration.api._support_content import (
    commit,
    create_audience,
    expect,
    import_url,
    start_import,
    upload,
    ws_url,
)

ROWS = 100_000
CHUNK = 64 * 1024


def line(i: int) -> str:
    """Every 1,000th row lacks a column; every 500th (not 1,000th) repeats an earlier mobile number."""
    if i % 1000 == 0:
        return f"1380{i:07d}\n"
    mobile = i - 1 if i % 500 == 0 else i
    return f"1380{mobile:07d},Customer {i},user{i}@example.com\n"


async def body() -> AsyncIterator[bytes]:
    buffer = io.StringIO()
    buffer.write("mobile,name,email\n")
    for i in range(1, ROWS + 1):
        buffer.write(line(i))
        if buffer.tell() >= CHUNK:
            yield buffer.getvalue().encode()
            buffer = io.StringIO()
    yield buffer.getvalue().encode()


async def test_a_hundred_thousand_rows_are_staged_and_committed_exactly(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        audience = await create_audience(app, ws)
        started = await start_import(
            app,
            ws,
            audience["id"],
            fieldMapping={"mobile": "mobile", "name": "name", "email": "email"},
            itemIdField="mobile",
        )
        staged = expect(await upload(app, ws, audience["id"], started["id"], body()), 200)
        rejected = ROWS // 1000
        duplicates = ROWS // 500 - rejected
        assert staged["counts"] == {
            "totalRows": ROWS,
            "acceptedRows": ROWS - rejected - duplicates,
            "rejectedRows": rejected,
            "duplicateRows": duplicates,
        }

        errors = await app.client.get(
            import_url(ws, audience["id"], started["id"], "errors"), headers=app.admin()
        )
        table = list(csv.reader(io.StringIO(errors.content.decode("utf-8-sig"))))
        assert len(table) == 1 + rejected + duplicates
        assert table[1][:2] == ["501", "DUPLICATE_ITEM_KEY"]

        snapshot = expect(await commit(app, ws, audience["id"], started["id"], audience["version"]), 201)
        assert snapshot["recipientCount"] == ROWS - rejected - duplicates
        url = ws_url(ws, "audience-snapshots", snapshot["id"], "recipients")
        first = expect(await app.client.get(url, headers=app.admin(), params={"limit": 100}), 200)
        assert [r["sequence"] for r in first["items"]] == list(range(1, 101))
        assert first["items"][0]["itemId"] == "13800000001"
        assert first["items"][0]["fields"] == {
            "mobile": "13800000001",
            "name": "Customer 1",
            "email": "user1@example.com",
        }
