"""Integers past what their column holds are a 400 naming the field, on SQLite and on PostgreSQL (whose
INTEGER is 32 bits): the seeded fuzzer found ``"version": 2**63`` answered with a 500."""

from __future__ import annotations

from pathlib import Path

from tests.helpers_app import RunningApp
from tests.integration.api._support import default_workspace, service
from tests.integration.api._support_content import create_audience, create_message, ws_url

INT32_MAX = 2**31 - 1


async def _check_bounds(app: RunningApp) -> None:
    ws = await default_workspace(app)
    audience = await create_audience(app, ws)
    message = await create_message(app, ws)
    for resource, body in (
        (ws_url(ws, "audiences", audience["id"]), {"name": "renamed"}),
        (ws_url(ws, "messages", message["id"]), {"name": "renamed"}),
    ):
        for version in (INT32_MAX + 1, 2**63):
            refused = await app.client.put(resource, headers=app.admin(), json={**body, "version": version})
            assert refused.status_code == 400, refused.text
            assert [error["field"] for error in refused.json()["errors"]] == ["/version"]
        # The largest version the column holds is merely stale.
        stale = await app.client.put(resource, headers=app.admin(), json={**body, "version": INT32_MAX})
        assert (stale.status_code, stale.json()["code"]) == (409, "VERSION_CONFLICT")
    revisions = ws_url(ws, "messages", message["id"], "revisions")
    assert (await app.client.get(f"{revisions}/{INT32_MAX + 1}", headers=app.admin())).status_code == 400
    missing = await app.client.get(f"{revisions}/{INT32_MAX}", headers=app.admin())
    assert (missing.status_code, missing.json()["code"]) == (404, "RESOURCE_NOT_FOUND")


async def test_out_of_range_integers_are_refused_on_each_database(
    tmp_path: Path, database_backend: str, database_url: str
) -> None:
    async with service(
        tmp_path, WEPUSH_DATABASE_TYPE=database_backend, WEPUSH_DATABASE_URL=database_url
    ) as app:
        await _check_bounds(app)
