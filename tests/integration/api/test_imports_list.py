"""Listing an audience's imports through the API: newest first, a cursor bound to its filters, a state
filter, read access for a VIEWER and clear errors for an unknown audience or state."""

from __future__ import annotations

from pathlib import Path

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


async def test_imports_are_listed_newest_first_with_a_state_filter_and_a_bound_cursor(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        audience = await create_audience(app, ws)
        other = await create_audience(app, ws, "staff")
        await start_import(app, ws, other["id"], itemIdField="mobile")

        waiting = await start_import(app, ws, audience["id"], itemIdField="mobile")
        committed = await start_import(app, ws, audience["id"], itemIdField="mobile")
        expect(await upload(app, ws, audience["id"], committed["id"], b"mobile,name\n1,Ann\n"), 200)
        expect(await commit(app, ws, audience["id"], committed["id"], audience["version"]), 201)
        failed = await start_import(app, ws, audience["id"], itemIdField="mobile")
        refused = expect(await upload(app, ws, audience["id"], failed["id"], b"phone\n1\n"), 200)
        assert refused["state"] == "FAILED"

        first = expect(
            await app.client.get(import_url(ws, audience["id"]), headers=app.admin(), params={"limit": 2}),
            200,
        )
        assert [found["id"] for found in first["items"]] == [failed["id"], committed["id"]]
        assert first["items"][0]["failureReason"]
        assert first["page"]["hasMore"] is True
        rest = expect(
            await app.client.get(
                import_url(ws, audience["id"]),
                headers=app.admin(),
                params={"limit": 2, "cursor": first["page"]["nextCursor"]},
            ),
            200,
        )
        assert [found["id"] for found in rest["items"]] == [waiting["id"]]
        assert rest["page"]["hasMore"] is False

        _, viewer = await issue_token(app, ws, "VIEWER")
        open_or_failed = expect(
            await app.client.get(
                import_url(ws, audience["id"]),
                headers=viewer,
                params=[("state", "CREATED"), ("state", "FAILED")],
            ),
            200,
        )
        assert [found["state"] for found in open_or_failed["items"]] == ["FAILED", "CREATED"]

        # A cursor is bound to the filters it was issued for.
        reused = await app.client.get(
            import_url(ws, audience["id"]),
            headers=app.admin(),
            params={"limit": 2, "cursor": first["page"]["nextCursor"], "state": "CREATED"},
        )
        assert (reused.status_code, reused.json()["code"]) == (400, "CURSOR_INVALID")


async def test_an_unknown_state_or_audience_is_a_clear_error(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        audience = await create_audience(app, ws)

        bad_state = await app.client.get(
            import_url(ws, audience["id"]), headers=app.admin(), params={"state": "DONE"}
        )
        assert bad_state.status_code == 400
        assert bad_state.headers["content-type"].startswith("application/problem+json")
        assert bad_state.json()["errors"][0]["field"] == "state"

        await start_import(app, ws, audience["id"], itemIdField="mobile")
        expect(await app.client.get(import_url(ws, audience["id"]), headers=app.admin()), 200)
        assert (
            await app.client.delete(ws_url(ws, "audiences", audience["id"]), headers=app.admin())
        ).status_code == 204
        deleted = await app.client.get(import_url(ws, audience["id"]), headers=app.admin())
        assert (deleted.status_code, deleted.json()["code"]) == (404, "RESOURCE_NOT_FOUND")

        missing = await app.client.get(
            import_url(ws, "01939e8f-0000-7000-8000-000000000000"), headers=app.admin()
        )
        assert (missing.status_code, missing.json()["code"]) == (404, "RESOURCE_NOT_FOUND")
