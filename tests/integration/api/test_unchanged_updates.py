"""An update that changes nothing writes nothing: no new version for the next editor to conflict with,
no audit event for a modification that did not happen; a stale version still conflicts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.helpers_app import RunningApp
from tests.integration.api._support import (
    API,
    accounts_url,
    create_account,
    default_workspace,
    http_account,
    service,
)
from tests.integration.api._support_content import (
    create_audience,
    create_message,
    expect,
    job_body,
    job_world,
    ws_url,
)


async def _audit_count(app: RunningApp, ws: str) -> int:
    page = expect(
        await app.client.get(ws_url(ws, "audit-events"), headers=app.admin(), params={"limit": 100}), 200
    )
    return len(page["items"])


async def _check(app: RunningApp, ws: str, url: str, body: dict[str, Any], changed: dict[str, Any]) -> None:
    before = expect(await app.client.get(url, headers=app.admin()), 200)
    events = await _audit_count(app, ws)
    same = expect(await app.client.put(url, headers=app.admin(), json=body), 200)
    assert same == before
    assert await _audit_count(app, ws) == events
    stale = await app.client.put(url, headers=app.admin(), json={**body, "version": before["version"] + 5})
    assert (stale.status_code, stale.json()["code"]) == (409, "VERSION_CONFLICT")
    edited = expect(await app.client.put(url, headers=app.admin(), json={**body, **changed}), 200)
    assert edited["version"] == before["version"] + 1
    assert await _audit_count(app, ws) == events + 1


async def test_saving_a_resource_unchanged_keeps_its_version_and_records_nothing(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        workspace = expect(await app.client.get(f"{API}/workspaces/{ws}", headers=app.admin()), 200)
        await _check(
            app,
            ws,
            f"{API}/workspaces/{ws}",
            {
                "name": workspace["name"],
                "description": workspace["description"],
                "version": workspace["version"],
            },
            {"description": "the team's workspace"},
        )
        audience = await create_audience(app, ws, "prospects")
        await _check(
            app,
            ws,
            ws_url(ws, "audiences", audience["id"]),
            {"name": "prospects", "version": audience["version"]},
            {"name": "leads"},
        )
        message = await create_message(app, ws, "welcome")
        await _check(
            app,
            ws,
            ws_url(ws, "messages", message["id"]),
            {"name": "welcome", "version": message["version"]},
            {"description": "first contact"},
        )
        definition = job_body(await job_world(app, ws))
        job = expect(await app.client.post(ws_url(ws, "jobs"), headers=app.admin(), json=definition), 201)
        await _check(
            app,
            ws,
            ws_url(ws, "jobs", job["id"]),
            {**definition, "policies": job["policies"], "version": job["version"]},
            {"name": "monthly"},
        )


async def test_saving_an_account_unchanged_keeps_its_version_and_a_new_secret_value_does_not(
    tmp_path: Path,
) -> None:
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        account = await create_account(app, ws, http_account("billing"))
        keep = {"http-account-token": {"operation": "KEEP"}}
        await _check(
            app,
            ws,
            accounts_url(ws, account["id"]),
            {"name": "billing", "config": account["config"], "secrets": keep, "version": account["version"]},
            {"secrets": {"http-account-token": {"operation": "REPLACE", "value": "a-new-token-value"}}},
        )
