"""Token names and the last working ADMIN hold under concurrent requests, on SQLite and PostgreSQL.

Neither rule has a unique index to lean on, so the use cases queue on the workspace row, as membership
changes do. On PostgreSQL a side transaction takes that row ``FOR UPDATE`` and changes what the rule
looks at before it commits: the request must wait for it and then answer from what was committed. A use
case that checked before taking the row would answer from what it saw first, and the test fails.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from tests.fixtures.db import waiting_on_a_lock
from tests.helpers_app import RunningApp
from tests.integration.api._support import API, default_workspace, issue_token, service
from wepush.server.infra.db import create_database
from wepush.server.infra.db.tables import api_token, workspace

#: Enough simultaneous copies that, without the workspace row held, some pass the check together.
COPIES = 4


def tokens_url(workspace_id: str, *rest: str) -> str:
    return "/".join([f"{API}/workspaces/{workspace_id}/api-tokens", *rest])


@asynccontextmanager
async def _backend(tmp_path: Path, backend: str, url: str) -> AsyncIterator[RunningApp]:
    async with service(tmp_path, WEPUSH_DATABASE_TYPE=backend, WEPUSH_DATABASE_URL=url) as app:
        yield app


@asynccontextmanager
async def _postgres(tmp_path: Path, postgres_url: str) -> AsyncIterator[tuple[RunningApp, AsyncEngine]]:
    side = create_database(postgres_url)
    try:
        async with _backend(tmp_path, "postgresql", postgres_url) as app:
            yield app, side
    finally:
        await side.dispose()


@asynccontextmanager
async def _holding_workspace(side: AsyncEngine, workspace_id: str) -> AsyncIterator[AsyncConnection]:
    """A transaction holding the workspace row FOR UPDATE, as a membership change does; committed at the end."""
    async with side.begin() as connection:
        held = await connection.scalar(
            select(workspace.c.id).where(workspace.c.id == workspace_id).with_for_update()
        )
        assert held == workspace_id
        yield connection


async def test_simultaneous_creates_with_one_name_make_one_token(
    tmp_path: Path, database_backend: str, database_url: str
) -> None:
    async with _backend(tmp_path, database_backend, database_url) as app:
        ws = await default_workspace(app)
        body = {"name": "raced", "role": "VIEWER"}
        answers = await asyncio.gather(
            *(app.client.post(tokens_url(ws), headers=app.admin(), json=body) for _ in range(COPIES))
        )
        listed = await app.client.get(tokens_url(ws), headers=app.admin())

    assert sorted(a.status_code for a in answers) == [201] + [400] * (COPIES - 1)
    refused = [a.json() for a in answers if a.status_code == 400]
    assert {e["code"] for r in refused for e in r["errors"]} == {"NAME_ALREADY_USED"}
    assert [t["name"] for t in listed.json()["items"]].count("raced") == 1


async def test_two_admins_revoked_together_leave_one(
    tmp_path: Path, database_backend: str, database_url: str
) -> None:
    async with _backend(tmp_path, database_backend, database_url) as app:
        ws = await default_workspace(app)
        ids = [(await issue_token(app, ws, "ADMIN", name=f"admin-{n}"))[0] for n in range(2)]
        answers = await asyncio.gather(
            *(app.client.delete(tokens_url(ws, token_id), headers=app.admin()) for token_id in ids)
        )

    assert sorted(a.status_code for a in answers) == [204, 409]
    assert [a.json()["code"] for a in answers if a.status_code == 409] == ["RESOURCE_IN_USE"]


@pytest.mark.postgres
async def test_a_create_waits_for_the_workspace_row_and_sees_the_name_committed_meanwhile(
    tmp_path: Path, postgres_url: str
) -> None:
    async with _postgres(tmp_path, postgres_url) as (app, side_engine):
        ws = await default_workspace(app)
        other_id, _ = await issue_token(app, ws, "VIEWER", name="other")
        async with _holding_workspace(side_engine, ws) as side:
            creating = await waiting_on_a_lock(
                side_engine,
                app.client.post(tokens_url(ws), headers=app.admin(), json={"name": "ci", "role": "VIEWER"}),
            )
            await side.execute(update(api_token).where(api_token.c.id == other_id).values(name="ci"))
        created = await creating

    assert created.status_code == 400, created.text
    assert [e["code"] for e in created.json()["errors"]] == ["NAME_ALREADY_USED"]


@pytest.mark.postgres
async def test_a_revocation_waits_for_the_workspace_row_and_sees_the_other_admin_gone(
    tmp_path: Path, postgres_url: str
) -> None:
    async with _postgres(tmp_path, postgres_url) as (app, side_engine):
        ws = await default_workspace(app)
        first_id, _ = await issue_token(app, ws, "ADMIN", name="first")
        second_id, _ = await issue_token(app, ws, "ADMIN", name="second")
        async with _holding_workspace(side_engine, ws) as side:
            revoking = await waiting_on_a_lock(
                side_engine, app.client.delete(tokens_url(ws, first_id), headers=app.admin())
            )
            await side.execute(
                update(api_token)
                .where(api_token.c.id == second_id)
                .values(revoked_at=func.now(), version=api_token.c.version + 1)
            )
        revoked = await revoking

    assert revoked.status_code == 409, revoked.text
    assert revoked.json()["code"] == "RESOURCE_IN_USE"
