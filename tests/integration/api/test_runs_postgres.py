"""The main Run flow on PostgreSQL: executed by the embedded agent against a loopback vendor, followed to
its end, with an idempotent start; and the PENDING cancel."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.integration.api._support_content import HTTP_CONTENT
from tests.integration.api._support_runs import confirm, seed_world, service, start, until_ended
from wepush.agent.providers.testing import VendorServer

pytestmark = pytest.mark.postgres

MESSAGE = HTTP_CONTENT


async def test_a_run_executes_and_is_listed_on_postgresql(tmp_path: Path, postgres_url: str) -> None:
    env = {
        "WEPUSH_DATABASE_TYPE": "postgresql",
        "WEPUSH_DATABASE_URL": postgres_url,
        "WEPUSH_AGENT_EMBEDDED_ENABLED": "true",
    }
    async with VendorServer() as vendor, service(tmp_path, **env) as app:
        assert app.runtime.config.database.url.startswith("postgresql+asyncpg://")
        world = await seed_world(
            app,
            provider_id="wepush.http",
            account_config={"baseUrl": vendor.base_url, "auth": {"type": "NONE"}},
            message_content=MESSAGE,
        )
        token = (await confirm(app, world))["confirmationToken"]
        first = await start(app, world, {"confirmationToken": token}, key="pg-1")
        replay = await start(app, world, {"confirmationToken": token}, key="pg-1")
        run_id = first.json()["id"]
        stream = await asyncio.wait_for(
            app.client.get(world.runs_url(run_id, "events"), headers=app.admin()), 60
        )
        detail = (await app.client.get(world.runs_url(run_id), headers=app.admin())).json()
        listing = (
            await app.client.get(world.runs_url(), headers=app.admin(), params={"state": "SUCCEEDED"})
        ).json()

    assert first.status_code == 202
    assert replay.json() == first.json()
    assert "event: run_completed" in stream.text
    assert detail["state"] == "SUCCEEDED"
    assert detail["counts"]["succeeded"] == 4
    assert [r["id"] for r in listing["items"]] == [run_id]
    assert vendor.request_count == 4


async def test_a_pending_run_is_cancelled_with_every_item_unsent_on_postgresql(
    tmp_path: Path, postgres_url: str
) -> None:
    async with service(tmp_path, WEPUSH_DATABASE_TYPE="postgresql", WEPUSH_DATABASE_URL=postgres_url) as app:
        world = await seed_world(app)
        run_id = (await start(app, world, {"dryRun": True})).json()["id"]
        illegal = await app.client.post(world.runs_url(run_id, "commands", "pause"), headers=app.admin())
        cancel = await app.client.post(world.runs_url(run_id, "commands", "cancel"), headers=app.admin())
        await until_ended(app, world, run_id)
        items = (await app.client.get(world.runs_url(run_id, "items"), headers=app.admin())).json()
        detail = (await app.client.get(world.runs_url(run_id), headers=app.admin())).json()

    assert illegal.status_code == 409
    assert illegal.json()["allowedCommands"] == ["CANCEL"]
    assert cancel.status_code == 202
    assert detail["state"] == "CANCELLED"
    assert [i["state"] for i in items["items"]] == ["UNSENT"] * 4
