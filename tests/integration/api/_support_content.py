"""Shared set-up for the message, audience, import and job API tests (everything through the real app).

Workspace, tokens and accounts come from the accounts engineer's helpers in ``_support``; this module adds
the content resources: messages, audiences, imports and jobs, created through the public API.
"""

from __future__ import annotations

from typing import Any

import httpx

from tests.helpers_app import RunningApp
from tests.integration.api._support import API, create_account, http_account

HTTP_CONTENT: dict[str, Any] = {
    "method": "POST",
    "path": "/notify",
    "headers": {"Content-Type": "application/json"},
    "bodyTemplate": '{"mobile":"{{mobile}}"}',
}


def ws_url(workspace_id: str, *rest: str) -> str:
    return "/".join([f"{API}/workspaces/{workspace_id}", *rest])


def expect(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body: dict[str, Any] = response.json()
    return body


async def create_message(
    app: RunningApp, ws: str, name: str = "greeting", content: dict[str, Any] | None = None
) -> dict[str, Any]:
    response = await app.client.post(
        ws_url(ws, "messages"),
        headers=app.admin(),
        json={"name": name, "providerId": "wepush.http", "content": content or HTTP_CONTENT},
    )
    return expect(response, 201)


async def create_audience(app: RunningApp, ws: str, name: str = "customers") -> dict[str, Any]:
    return expect(
        await app.client.post(ws_url(ws, "audiences"), headers=app.admin(), json={"name": name}), 201
    )


def import_url(ws: str, audience_id: str, *rest: str) -> str:
    return ws_url(ws, "audiences", audience_id, "imports", *rest)


async def start_import(app: RunningApp, ws: str, audience_id: str, **settings: Any) -> dict[str, Any]:
    body = {"format": "CSV", "fieldMapping": {"mobile": "mobile", "name": "name"}, **settings}
    return expect(await app.client.post(import_url(ws, audience_id), headers=app.admin(), json=body), 201)


async def upload(
    app: RunningApp,
    ws: str,
    audience_id: str,
    import_id: str,
    content: bytes | Any,
    *,
    media_type: str = "text/csv",
    headers: dict[str, str] | None = None,
) -> httpx.Response:
    return await app.client.put(
        import_url(ws, audience_id, import_id, "content"),
        headers={**(headers or app.admin()), "Content-Type": media_type},
        content=content,
        timeout=600,
    )


async def commit(app: RunningApp, ws: str, audience_id: str, import_id: str, version: int) -> httpx.Response:
    return await app.client.post(
        import_url(ws, audience_id, import_id, "commit"), headers=app.admin(), json={"version": version}
    )


async def snapshot_of(
    app: RunningApp, ws: str, rows: list[tuple[str, str]], name: str = "customers"
) -> dict[str, Any]:
    """An audience whose first snapshot holds ``rows`` of (mobile, name)."""
    audience = await create_audience(app, ws, name)
    started = await start_import(app, ws, audience["id"], itemIdField="mobile")
    text = "mobile,name\n" + "".join(f"{mobile},{who}\n" for mobile, who in rows)
    expect(await upload(app, ws, audience["id"], started["id"], text.encode()), 200)
    return expect(await commit(app, ws, audience["id"], started["id"], audience["version"]), 201)


async def http_account_id(app: RunningApp, ws: str, name: str = "orders") -> str:
    created = await create_account(app, ws, http_account(name))
    return str(created["id"])


async def job_world(app: RunningApp, ws: str) -> dict[str, str]:
    """An account, a message and an audience snapshot that a job can reference."""
    message = await create_message(app, ws)
    snapshot = await snapshot_of(app, ws, [("13800000001", "Ann"), ("13800000002", "Bob")])
    return {
        "accountId": await http_account_id(app, ws),
        "messageId": message["id"],
        "audienceSnapshotId": snapshot["id"],
    }


def job_body(world: dict[str, str], name: str = "weekly", **extra: Any) -> dict[str, Any]:
    return {"name": name, "messageRevision": 1, **world, **extra}
