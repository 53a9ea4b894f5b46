"""Standalone SQLite has one writer at a time. A writer that waits past the busy timeout gets a stable,
retryable refusal — 503 SERVICE_NOT_READY with Retry-After, nothing done — never a 500 with the driver's
"database is locked" in the log.

The timeout is shortened for the test (the Service waits 30 s); a second connection holds the write lock.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from tests.helpers_app import running_app, standalone_config
from wepush.server.domain import DatabaseBusy
from wepush.server.infra.db import SqlUnitOfWorkFactory, create_database
from wepush.server.infra.db import engine as engine_module


@asynccontextmanager
async def write_lock_held(path: Path | str) -> AsyncIterator[None]:
    """Hold SQLite's write lock from a connection of another thread. Taken off the event loop: waiting
    for the lock on the loop would stop the Service's own transactions from ever finishing."""
    holder = sqlite3.connect(path, isolation_level=None, timeout=30, check_same_thread=False)
    try:
        await asyncio.to_thread(holder.execute, "BEGIN IMMEDIATE")
        yield
        holder.execute("ROLLBACK")
    finally:
        holder.close()


@pytest.fixture
def short_busy_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine_module, "SQLITE_BUSY_TIMEOUT_MS", 200)


@pytest.mark.usefixtures("short_busy_timeout")
async def test_a_writer_that_waits_past_the_busy_timeout_gets_database_busy(sqlite_url: str) -> None:
    engine = create_database(sqlite_url)
    uow = SqlUnitOfWorkFactory(engine)
    try:
        async with write_lock_held(engine.url.database or ""):
            with pytest.raises(DatabaseBusy):
                async with uow() as unit:
                    await unit.workspaces.find_by_name("Default")
            async with uow(read_only=True) as unit:  # readers never wait for the writer (WAL)
                await unit.workspaces.find_by_name("Default")
        async with uow() as unit:  # the lock released, the same factory writes again
            await unit.workspaces.find_by_name("Default")
    finally:
        await engine.dispose()


@pytest.mark.usefixtures("short_busy_timeout")
async def test_the_api_answers_a_busy_database_with_a_retryable_503(tmp_path: Path) -> None:
    async with running_app(standalone_config(tmp_path)) as app:
        workspaces = (await app.client.get("/api/v1/workspaces", headers=app.admin())).json()
        ws = workspaces["items"][0]["id"]
        (database,) = (tmp_path / "data").glob("*.db")
        async with write_lock_held(database):
            busy = await app.client.post(
                f"/api/v1/workspaces/{ws}/audiences", headers=app.admin(), json={"name": "customers"}
            )
        after = await app.client.get(f"/api/v1/workspaces/{ws}/audiences", headers=app.admin())
    assert busy.status_code == 503
    assert busy.headers["content-type"].startswith("application/problem+json")
    assert busy.headers["retry-after"] == "5"
    assert busy.json()["code"] == "SERVICE_NOT_READY"
    assert "locked" not in busy.text
    assert after.json()["items"] == []


@pytest.mark.usefixtures("short_busy_timeout")
async def test_reads_and_readiness_do_not_queue_behind_a_writer(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with running_app(standalone_config(tmp_path)) as app:
        ws = (await app.client.get("/api/v1/workspaces", headers=app.admin())).json()["items"][0]["id"]
        issued = await app.client.post(
            f"/api/v1/workspaces/{ws}/api-tokens",
            headers=app.admin(),
            json={"name": "reader", "role": "VIEWER"},
        )
        reader = {"Authorization": f"Bearer {issued.json()['token']}"}
        (database,) = (tmp_path / "data").glob("*.db")
        async with write_lock_held(database):
            # The token's first use is due a last-used write: it is skipped, the read is answered.
            listed = await app.client.get(f"/api/v1/workspaces/{ws}/audiences", headers=reader)
            ready = await app.client.get("/health/ready")
            refused = await app.client.post(
                f"/api/v1/workspaces/{ws}/audiences", headers=app.admin(), json={"name": "customers"}
            )
    assert listed.status_code == 200
    assert ready.json()["checks"]["database"]["status"] == "UP"
    assert refused.status_code == 503
    # A busy database is expected and retryable: one warning line, no traceback, nothing at ERROR.
    assert [r for r in caplog.records if r.name == "wepush.server.api" and r.levelno >= logging.ERROR] == []
    assert all(r.exc_info is None for r in caplog.records if getattr(r, "event", "") == "REQUEST_NOT_READY")
    assert any(getattr(r, "event", "") == "REQUEST_NOT_READY" for r in caplog.records)
