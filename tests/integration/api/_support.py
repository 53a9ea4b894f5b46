"""Shared set-up for the resource API tests: the running app, role tokens, HTTP accounts, a vendor stand-in.

Everything goes through the real app in-process (Connexion validation of requests and responses
included); tokens of other roles are issued through the tokens API itself.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

from tests.contract.repositories._world import accepted, commit_audience
from tests.helpers_app import RunningApp, running_app, standalone_config
from wepush.agent.providers.catalog import ProviderCatalog
from wepush.agent.providers.http import HttpProviderFactory
from wepush.server.domain import Audience, Job, Message, MessageRevision, UnitOfWorkFactory, utc_now

API = "/api/v1"
#: A bearer token that must never come back out of the Service in any form.
SECRET_VALUE = "tok-Zq81xW-never-echo-4f2b9c"
OTHER_SECRET_VALUE = "tok-Rr55kP-also-hidden-77ad01"


def loopback_catalog() -> ProviderCatalog:
    """The HTTP provider with its explicit test setting that lets it reach 127.0.0.1."""
    return ProviderCatalog.from_factories([HttpProviderFactory(allow_loopback_for_tests=True)])


@asynccontextmanager
async def service(
    tmp_path: Path, *, catalog: ProviderCatalog | None = None, **env: str
) -> AsyncIterator[RunningApp]:
    async with running_app(standalone_config(tmp_path, **env), catalog=catalog) as app:
        yield app


async def default_workspace(app: RunningApp) -> str:
    response = await app.client.get(f"{API}/workspaces", headers=app.admin(), params={"name": "default"})
    assert response.status_code == 200
    return str(response.json()["items"][0]["id"])


async def create_workspace(app: RunningApp, name: str) -> str:
    response = await app.client.post(f"{API}/workspaces", headers=app.admin(), json={"name": name})
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def issue_token(
    app: RunningApp,
    workspace_id: str,
    role: str,
    *,
    name: str | None = None,
    as_headers: dict[str, str] | None = None,
) -> tuple[str, dict[str, str]]:
    """Create a token through the API; returns its id and ready-to-use headers."""
    response = await app.client.post(
        f"{API}/workspaces/{workspace_id}/api-tokens",
        headers=as_headers or app.admin(),
        json={"name": name or f"{role.lower()}-token", "role": role},
    )
    assert response.status_code == 201, response.text
    body = response.json()
    return str(body["id"]), bearer(body["token"])


def accounts_url(workspace_id: str, *rest: str) -> str:
    return "/".join([f"{API}/workspaces/{workspace_id}/accounts", *rest])


def http_account(
    name: str = "orders",
    *,
    base_url: str = "https://api.example.com",
    secret_name: str = "http-account-token",
    value: str | None = SECRET_VALUE,
    **config: Any,
) -> dict[str, Any]:
    """An HTTP-provider account whose bearer token is a REPLACE secret (or no secrets if ``value`` is None)."""
    body: dict[str, Any] = {
        "name": name,
        "providerId": "wepush.http",
        "config": {
            "baseUrl": base_url,
            "auth": {"type": "BEARER", "token": {"$secret": secret_name}},
            "connectTimeout": "PT2S",
            **config,
        },
    }
    if value is not None:
        body["secrets"] = {secret_name: {"operation": "REPLACE", "value": value}}
    return body


async def create_account(app: RunningApp, workspace_id: str, body: dict[str, Any]) -> dict[str, Any]:
    response = await app.client.post(accounts_url(workspace_id), headers=app.admin(), json=body)
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()
    return created


def uow(app: RunningApp) -> UnitOfWorkFactory:
    factory = app.runtime.uow
    assert factory is not None
    return factory


async def add_job_using(app: RunningApp, workspace_id: str, account_id: str) -> Job:
    """Write a message, an audience snapshot and a job that references ``account_id`` (the jobs API is
    another team's; the reference rule lives in the repository and the use case enforces it)."""
    factory = uow(app)
    now = utc_now()
    message = Message(
        workspace_id=workspace_id, name="greeting", provider_id="wepush.http", created_at=now, updated_at=now
    )
    revision = MessageRevision.of(
        workspace_id=workspace_id, message_id=message.id, revision=1, content={"path": "/notify"}, now=now
    )
    audience = Audience(workspace_id=workspace_id, name="customers", created_at=now, updated_at=now)
    async with factory() as tx:
        await tx.messages.add(message, revision)
        await tx.audiences.add(audience)
    _, snapshot = await commit_audience(factory, audience, [accepted(1, "13800000001")], now)
    job = Job(
        workspace_id=workspace_id,
        name="weekly",
        account_id=account_id,
        message_id=message.id,
        message_revision=1,
        audience_snapshot_id=snapshot.id,
        policies={"concurrency": {"min": 1, "max": 10, "target": 5}},
        created_at=now,
        updated_at=now,
    )
    async with factory() as tx:
        await tx.jobs.add(job)
    return job


@dataclass
class VendorStandIn:
    """A loopback HTTP server standing in for a channel vendor; it accepts exactly one bearer token."""

    base_url: str
    expected_token: str
    seen_authorization: list[str] = field(default_factory=list)


@asynccontextmanager
async def vendor_server(expected_token: str) -> AsyncIterator[VendorStandIn]:
    state = VendorStandIn(base_url="", expected_token=expected_token)

    async def handle(request: web.Request) -> web.Response:
        header = request.headers.get("Authorization", "")
        state.seen_authorization.append(header)
        return web.Response(status=204 if header == f"Bearer {expected_token}" else 401)

    application = web.Application()
    application.router.add_route("*", "/{tail:.*}", handle)
    runner = web.AppRunner(application, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    state.base_url = f"http://127.0.0.1:{port}/api"
    try:
        yield state
    finally:
        await runner.cleanup()
