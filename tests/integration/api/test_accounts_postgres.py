"""The account flow on PostgreSQL: the same app, the same contract, the other database."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.api._support import (
    SECRET_VALUE,
    accounts_url,
    create_account,
    default_workspace,
    http_account,
    service,
    uow,
)

pytestmark = pytest.mark.postgres


async def test_account_create_get_and_secret_sealing_on_postgresql(tmp_path: Path, postgres_url: str) -> None:
    async with service(tmp_path, WEPUSH_DATABASE_TYPE="postgresql", WEPUSH_DATABASE_URL=postgres_url) as app:
        assert app.runtime.config.database.url.startswith("postgresql+asyncpg://")
        ws = await default_workspace(app)
        headers = {**app.admin(), "Idempotency-Key": "pg-create-1"}
        created = await app.client.post(accounts_url(ws), headers=headers, json=http_account())
        assert created.status_code == 201, created.text
        replay = await app.client.post(accounts_url(ws), headers=headers, json=http_account())
        assert replay.json() == created.json()
        got = await app.client.get(accounts_url(ws, created.json()["id"]), headers=app.admin())
        assert got.json() == created.json()
        assert SECRET_VALUE not in got.text
        second = await create_account(app, ws, http_account("second"))
        listed = await app.client.get(accounts_url(ws), headers=app.admin(), params={"name": "SEC"})
        assert [a["id"] for a in listed.json()["items"]] == [second["id"]]
        async with uow(app)(read_only=True) as tx:
            [record] = await tx.secret_records.list_for_owner(ws, "ACCOUNT", created.json()["id"])
        assert SECRET_VALUE.encode() not in record.ciphertext
