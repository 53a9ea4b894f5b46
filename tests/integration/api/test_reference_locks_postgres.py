"""The use cases hold what they reference on PostgreSQL, so a delete running beside them cannot slip in.

A side transaction takes the row the way a delete (or a finishing run, or another membership change)
does, ``FOR UPDATE``. The request that references the row must then wait for it, which PostgreSQL
reports; the side transaction finishes, and the request answers from what was committed. A use case that
read the row without holding it would not wait, and the test fails.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest
from sqlalchemy import Table, select, text, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from tests.fixtures.db import waiting_on_a_lock
from tests.helpers_app import RunningApp
from tests.integration.api._support import issue_token
from tests.integration.api._support_runs import confirm, seed_world, service, start
from wepush.server.infra.db import create_database
from wepush.server.infra.db.tables import account, job, run, workspace

pytestmark = pytest.mark.postgres


@asynccontextmanager
async def _postgres_service(
    tmp_path: Path, postgres_url: str
) -> AsyncIterator[tuple[RunningApp, AsyncEngine]]:
    env = {
        "WEPUSH_DATABASE_TYPE": "postgresql",
        "WEPUSH_DATABASE_URL": postgres_url,
        # No agent: a started run stays PENDING, so nothing but the test touches it.
        "WEPUSH_AGENT_EMBEDDED_ENABLED": "false",
    }
    side = create_database(postgres_url)
    try:
        async with service(tmp_path, **env) as app:
            yield app, side
    finally:
        await side.dispose()


@asynccontextmanager
async def _holding(side: AsyncEngine, table: Table, row_id: str) -> AsyncIterator[AsyncConnection]:
    """A transaction holding ``row_id`` FOR UPDATE, as a delete or a state change does; committed at the end."""
    async with side.begin() as connection:
        held = await connection.scalar(select(table.c.id).where(table.c.id == row_id).with_for_update())
        assert held == row_id
        yield connection


async def test_creating_a_job_waits_for_a_delete_of_its_account_and_then_refuses(
    tmp_path: Path, postgres_url: str
) -> None:
    async with _postgres_service(tmp_path, postgres_url) as (app, side):
        world = await seed_world(app, provider_id="wepush.fake")
        body = {
            "name": "second",
            "accountId": world.account.id,
            "messageId": world.message.id,
            "messageRevision": 1,
            "audienceSnapshotId": world.snapshot.id,
        }
        # A first job references the account; deleting it here is the part of a delete that wins.
        async with _holding(side, account, world.account.id) as deleting:
            creating = await waiting_on_a_lock(
                side, app.client.post(world.job_url().rsplit("/", 1)[0], headers=app.admin(), json=body)
            )
            await deleting.execute(
                update(account).where(account.c.id == world.account.id).values(deleted_at=text("now()"))
            )
        refused: httpx.Response = await creating

    assert refused.status_code == 400, refused.text
    assert [(e["field"], e["code"]) for e in refused.json()["errors"]] == [("/accountId", "NOT_FOUND")]


async def test_starting_a_run_waits_for_a_delete_of_its_job_and_then_refuses(
    tmp_path: Path, postgres_url: str
) -> None:
    async with _postgres_service(tmp_path, postgres_url) as (app, side):
        world = await seed_world(app, provider_id="wepush.fake")
        token = (await confirm(app, world))["confirmationToken"]
        async with _holding(side, job, world.job.id) as deleting:
            starting = await waiting_on_a_lock(
                side, start(app, world, {"confirmationToken": token}, key="locked")
            )
            await deleting.execute(
                update(job).where(job.c.id == world.job.id).values(deleted_at=text("now()"))
            )
        refused: httpx.Response = await starting

    assert refused.status_code == 404, refused.text
    assert refused.json()["code"] == "RESOURCE_NOT_FOUND"


async def test_a_command_waits_for_a_run_changing_state_and_answers_from_its_new_state(
    tmp_path: Path, postgres_url: str
) -> None:
    async with _postgres_service(tmp_path, postgres_url) as (app, side):
        world = await seed_world(app, provider_id="wepush.fake")
        token = (await confirm(app, world))["confirmationToken"]
        run_id = (await start(app, world, {"confirmationToken": token})).json()["id"]
        async with _holding(side, run, run_id) as finishing:
            commanding = await waiting_on_a_lock(
                side,
                app.client.post(world.runs_url(run_id, "commands", "pause"), headers=app.admin(), json={}),
            )
            await finishing.execute(
                update(run).where(run.c.id == run_id).values(state="SUCCEEDED", version=run.c.version + 1)
            )
        answered: httpx.Response = await commanding

    assert answered.status_code == 409, answered.text
    assert answered.json()["code"] == "RUN_STATE_CONFLICT"


async def test_a_membership_change_waits_for_another_one_in_the_same_workspace(
    tmp_path: Path, postgres_url: str
) -> None:
    async with _postgres_service(tmp_path, postgres_url) as (app, side):
        world = await seed_world(app, provider_id="wepush.fake")
        members = f"/api/v1/workspaces/{world.workspace_id}/members"
        first, _ = await issue_token(app, world.workspace_id, "VIEWER", name="first-admin")
        other, _ = await issue_token(app, world.workspace_id, "VIEWER", name="someone-else")
        for member in (first, other):
            added = await app.client.put(f"{members}/{member}", headers=app.admin(), json={"role": "ADMIN"})
            assert added.status_code == 200, added.text
        url = f"{members}/{other}"
        # A demotion changes an existing member (adding one would wait on the foreign key anyway).
        async with _holding(side, workspace, world.workspace_id):
            changing = await waiting_on_a_lock(
                side, app.client.put(url, headers=app.admin(), json={"role": "VIEWER"})
            )
        changed: httpx.Response = await changing

    assert changed.status_code == 200, changed.text
