"""Discarding an import: a wrong file or mapping is thrown away now (state DISCARDED, staged rows
removed, audited) instead of waiting 24 hours; imports being received or committed are refused."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from tests.integration.api._support import default_workspace, issue_token, service, uow
from tests.integration.api._support_content import (
    commit,
    create_audience,
    expect,
    import_url,
    start_import,
    upload,
    ws_url,
)
from wepush.server.domain import ImportCounts, ImportState, StagedRow, StagedRowStatus

FILE = b"mobile,name\n1,Ann\n2,Bo\n2,Bo again\n3\n"


def _row(line: int) -> StagedRow:
    return StagedRow(
        line_number=line, status=StagedRowStatus.ACCEPTED, item_key=str(line), fields={"mobile": str(line)}
    )


async def test_a_staged_import_is_discarded_with_its_rows_and_cannot_be_committed(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        audience = await create_audience(app, ws)
        started = await start_import(app, ws, audience["id"], itemIdField="mobile")
        staged = expect(await upload(app, ws, audience["id"], started["id"], FILE), 200)
        url = import_url(ws, audience["id"], started["id"])

        discarded = expect(await app.client.post(f"{url}/discard", headers=app.admin()), 200)
        assert discarded["state"] == "DISCARDED"
        assert discarded["counts"] == staged["counts"]
        async with uow(app)(read_only=True) as reading:
            assert await reading.audience_imports.count_staged(started["id"]) == ImportCounts()

        # A discard that stopped before its rows were gone (a crash) is finished by the next one.
        async with uow(app)() as writing:
            await writing.audience_imports.stage_rows(started["id"], [_row(2), _row(3)])
        again = expect(await app.client.post(f"{url}/discard", headers=app.admin()), 200)
        assert again == discarded
        async with uow(app)(read_only=True) as reading:
            assert await reading.audience_imports.count_staged(started["id"]) == ImportCounts()
        for refused in (
            await commit(app, ws, audience["id"], started["id"], audience["version"]),
            await app.client.get(f"{url}/preview", headers=app.admin()),
        ):
            assert (refused.status_code, refused.json()["code"]) == (409, "IMPORT_STATE_CONFLICT")
        assert expect(await app.client.get(url, headers=app.admin()), 200)["state"] == "DISCARDED"

        audit = expect(
            await app.client.get(
                ws_url(ws, "audit-events"), headers=app.admin(), params={"action": "audience_import.discard"}
            ),
            200,
        )
        assert [(e["resourceId"], e["outcome"]) for e in audit["items"]] == [(started["id"], "SUCCESS")]


async def test_an_import_waiting_for_its_file_is_discarded_and_then_refuses_the_file(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        audience = await create_audience(app, ws)
        started = await start_import(app, ws, audience["id"], itemIdField="mobile")
        url = import_url(ws, audience["id"], started["id"])

        expect(await app.client.post(f"{url}/discard", headers=app.admin()), 200)
        late = await upload(app, ws, audience["id"], started["id"], FILE)
        assert (late.status_code, late.json()["code"]) == (409, "IMPORT_STATE_CONFLICT")


async def test_imports_being_received_or_committed_are_not_discarded_and_a_viewer_cannot(
    tmp_path: Path,
) -> None:
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        audience = await create_audience(app, ws)
        committed = await start_import(app, ws, audience["id"], itemIdField="mobile")
        expect(await upload(app, ws, audience["id"], committed["id"], FILE), 200)
        expect(await commit(app, ws, audience["id"], committed["id"], audience["version"]), 201)
        receiving = await start_import(app, ws, audience["id"], itemIdField="mobile")
        async with uow(app)() as writing:
            stored = await writing.audience_imports.get(ws, receiving["id"])
            await writing.audience_imports.update(replace(stored, state=ImportState.STAGING))
        waiting = await start_import(app, ws, audience["id"], itemIdField="mobile")

        for found, state in ((committed, "COMMITTED"), (receiving, "STAGING")):
            refused = await app.client.post(
                import_url(ws, audience["id"], found["id"], "discard"), headers=app.admin()
            )
            assert (refused.status_code, refused.json()["code"]) == (409, "IMPORT_STATE_CONFLICT")
            assert state in refused.json()["detail"]
            if state == "STAGING":
                assert "once the upload has ended" in refused.json()["detail"]

        _, viewer = await issue_token(app, ws, "VIEWER")
        forbidden = await app.client.post(
            import_url(ws, audience["id"], waiting["id"], "discard"), headers=viewer
        )
        assert forbidden.status_code == 403
        still = expect(
            await app.client.get(import_url(ws, audience["id"], waiting["id"]), headers=viewer), 200
        )
        assert still["state"] == "CREATED"
