"""The content flow on PostgreSQL: import (COPY staging), dedupe, commit, recipients and a job."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.api._support import default_workspace, service
from tests.integration.api._support_content import (
    commit,
    create_audience,
    create_message,
    expect,
    http_account_id,
    import_url,
    start_import,
    upload,
    ws_url,
)

pytestmark = pytest.mark.postgres


async def test_import_commit_and_job_on_postgresql(tmp_path: Path, postgres_url: str) -> None:
    async with service(tmp_path, WEPUSH_DATABASE_TYPE="postgresql", WEPUSH_DATABASE_URL=postgres_url) as app:
        assert app.runtime.config.database.url.startswith("postgresql+asyncpg://")
        ws = await default_workspace(app)
        audience = await create_audience(app, ws)
        started = await start_import(app, ws, audience["id"], itemIdField="mobile")
        body = 'mobile,name\n1,"Ann\nAnn"\n2,Bob\n1,dup\n3,x,y\n4,Zoë\n'.encode() + b"5,\xff\n"
        staged = expect(await upload(app, ws, audience["id"], started["id"], body), 200)
        assert staged["counts"] == {"totalRows": 6, "acceptedRows": 3, "rejectedRows": 2, "duplicateRows": 1}
        errors = await app.client.get(
            import_url(ws, audience["id"], started["id"], "errors"), headers=app.admin()
        )
        assert errors.content.decode("utf-8-sig").splitlines()[1:] == [
            '"5","DUPLICATE_ITEM_KEY","the item key already appeared on an earlier line","1,dup"',
            '"6","COLUMN_COUNT","the line has 3 columns; the header has 2","3,x,y"',
            '"8","INVALID_ENCODING","the line is not valid utf-8; spreadsheet programs on Chinese systems usually save gb18030","5,\ufffd"',
        ]
        snapshot = expect(await commit(app, ws, audience["id"], started["id"], audience["version"]), 201)
        page = expect(
            await app.client.get(
                ws_url(ws, "audience-snapshots", snapshot["id"], "recipients"),
                headers=app.admin(),
                params={"limit": 2},
            ),
            200,
        )
        assert [(r["sequence"], r["itemId"], r["fields"]["name"]) for r in page["items"]] == [
            (1, "1", "Ann\nAnn"),
            (2, "2", "Bob"),
        ]
        message = await create_message(app, ws)
        job = await app.client.post(
            ws_url(ws, "jobs"),
            headers=app.admin(),
            json={
                "name": "pg job",
                "accountId": await http_account_id(app, ws),
                "messageId": message["id"],
                "messageRevision": 1,
                "audienceSnapshotId": snapshot["id"],
            },
        )
        assert expect(job, 201)["providerId"] == "wepush.http"
